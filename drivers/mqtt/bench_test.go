package mqtt

import (
	"context"
	"testing"

	"github.com/planrun/planrun/drivers"
)

// BenchmarkPublishQoS1 publishes QoS 1 messages through the producer, one
// at a time on one connection to the embedded broker, for each client:
// allocations and time per acknowledged message (the broker in the same
// process: compare the clients with each other, not with a real broker).
func BenchmarkPublishQoS1(b *testing.B) {
	for _, cl := range []string{clientPaho, clientLean} {
		b.Run(cl, func(b *testing.B) {
			tg := openEmbedded(b, cl)
			topic := "planrun/bench"
			p, err := tg.NewProducer(context.Background(), drivers.ProducerSpec{Workload: "bench", Topic: topic, Threads: 1},
				&ProduceOptions{QoS: intp(1)})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			m := &drivers.Message{Topic: topic, Value: make([]byte, 100)}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := p.Send(ctx, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
