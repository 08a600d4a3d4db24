package main

import (
	"context"
	"fmt"
	"github.com/planrun/planrun/engine/enginetest"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/planrun/planrun/cluster"
	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/reporters"
	"github.com/planrun/planrun/results"
)

// The fault the plan's exec steps inject into the Kafka broker, run by this
// test binary as a child process: drop deletes the first N records of a
// partition (Kafka's DeleteRecords, as kafka-delete-records.sh does), resend
// produces copies of a partition's first N records again, with the very
// payloads, so their identities arrive twice.
const (
	faultEnv   = "PLANRUN_TEST_KAFKA_FAULT"
	faultTopic = "faults"
	dropN      = 100 // records deleted from partition 0
	resendN    = 70  // records of partition 1 sent again
)

// kafkaFault injects the fault named by $PLANRUN_TEST_KAFKA_FAULT and prints
// how many records it touched; it returns the exit code.
func kafkaFault(stdout, stderr io.Writer) int {
	if err := injectKafkaFault(os.Getenv(faultEnv), strings.Split(os.Getenv("PLANRUN_TEST_BROKERS"), ","), stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func injectKafkaFault(mode string, brokers []string, stdout io.Writer) error {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	switch mode {
	case "drop":
		end, err := client.GetOffset(faultTopic, 0, sarama.OffsetNewest)
		if err != nil {
			return err
		}
		if end < dropN {
			return fmt.Errorf("partition 0 holds %d records, fewer than the %d to drop", end, dropN)
		}
		admin, err := sarama.NewClusterAdminFromClient(client)
		if err != nil {
			return err
		}
		if err := admin.DeleteRecords(faultTopic, map[int32]int64{0: dropN}); err != nil {
			return fmt.Errorf("deleting records: %w", err)
		}
		fmt.Fprintln(stdout, dropN)
	case "resend":
		consumer, err := sarama.NewConsumerFromClient(client)
		if err != nil {
			return err
		}
		defer consumer.Close()
		pc, err := consumer.ConsumePartition(faultTopic, 1, sarama.OffsetOldest)
		if err != nil {
			return err
		}
		defer pc.Close()
		var again []*sarama.ProducerMessage
		timeout := time.After(30 * time.Second)
		for len(again) < resendN {
			select {
			case m := <-pc.Messages():
				again = append(again, &sarama.ProducerMessage{Topic: faultTopic, Partition: 1, Value: sarama.ByteEncoder(m.Value)})
			case err := <-pc.Errors():
				return err
			case <-timeout:
				return fmt.Errorf("read %d records of partition 1 in 30s, want %d", len(again), resendN)
			}
		}
		producer, err := sarama.NewSyncProducerFromClient(client)
		if err != nil {
			return err
		}
		defer producer.Close()
		if err := producer.SendMessages(again); err != nil {
			return fmt.Errorf("sending again: %w", err)
		}
		fmt.Fprintln(stdout, resendN)
	default:
		return fmt.Errorf("unknown fault %q", mode)
	}
	return nil
}

// A producer on one worker and its consumer group on two others, with the
// broker made to lose and to redeliver known records between them: the
// merged lost and duplicates are exactly what the test did, although each
// message is acknowledged in one process and received in another.
func TestWorkersKafkaLostAndDuplicatesExact(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(4))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	addrs, _ := startWorkers(t, 3)
	const count = 4000
	text := `name: faults
vars:
  brokers: x
  self: x
  count: "4000"
targets:
  kafka: { driver: kafka, brokers: "${brokers}", topics: { faults: { partitions: 4 } } }
workloads:
  producer:
    on: [0]
    produce: { topic: faults, partitioner: round_robin, size: 200B, threads: 4, rate: 4000, count: "${count}" }
  consumer:
    on: [1, 2]
    consume: { topic: faults, group: faults-group, consumers: 2 }
progress: 0s
steps:
  - start: producer
  - wait: "!producer.running"
    timeout: 60s
  - exec: ["${self}", "-test.run=^$"]
    env: { PLANRUN_TEST_KAFKA_FAULT: drop, PLANRUN_TEST_BROKERS: "${brokers}" }
    as: dropped
  - exec: ["${self}", "-test.run=^$"]
    env: { PLANRUN_TEST_KAFKA_FAULT: resend, PLANRUN_TEST_BROKERS: "${brokers}" }
    as: resent
  - start: consumer
  - wait: consumer.received >= ${count} - probes.dropped.value + probes.resent.value
    timeout: 60s
  - stop: consumer
  - assert: consumer.lost == probes.dropped.value && consumer.duplicates == probes.resent.value
`
	set := map[string]string{"brokers": strings.Join(kc.ListenAddrs(), ","), "self": os.Args[0], "count": strconv.Itoa(count)}
	src, plans, err := plan.Parse("faults.yaml", []byte(text), plan.Options{Set: set, Formats: reporters.Names()})
	if err != nil {
		t.Fatal(err)
	}
	cond := &cluster.Conductor{Addrs: addrs, Token: "t0k", Version: version, File: "faults.yaml", Source: []byte(text), Set: set}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cond.Join(ctx); err != nil {
		t.Fatal(err)
	}
	defer cond.Close()
	var out strings.Builder
	res := (&engine.Engine{Out: &out, Version: version, Remote: cond}).Execute(ctx, src, plans)
	enginetest.CheckResult(t, res)
	if res.Status != results.Passed {
		t.Fatalf("status %s: %s\n%s", res.Status, res.Error, out.String())
	}
	run := res.Runs[0]
	p, c := run.Metrics.Workloads["producer"], run.Metrics.Workloads["consumer"]
	if p.Acked != count {
		t.Errorf("acked %d, want %d", p.Acked, count)
	}
	if want := int64(count - dropN + resendN); c.Received != want {
		t.Errorf("received %d, want %d", c.Received, want)
	}
	if c.Lost != dropN || c.Duplicates != resendN {
		t.Errorf("lost %d duplicates %d: want %d and %d (what the broker was made to drop and redeliver)", c.Lost, c.Duplicates, dropN, resendN)
	}
	ran := map[int]string{}
	for _, w := range run.Workers {
		ran[w.Index] = strings.Join(w.Workloads, ",")
	}
	if ran[0] != "producer" || ran[1] != "consumer" || ran[2] != "consumer" {
		t.Errorf("workers ran %v: want the producer on 0, the consumer on 1 and 2", ran)
	}
}
