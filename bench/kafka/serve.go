package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

// serve runs one kfake broker on 127.0.0.1:port until interrupted, printing
// its address on the first line.
func serve(port, partitions int) error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port),
		kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(partitions))
	if err != nil {
		return fmt.Errorf("starting kfake: %w", err)
	}
	defer c.Close()
	fmt.Println(c.ListenAddrs()[0])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}
