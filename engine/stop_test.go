package engine_test

import (
	"context"
	"testing"

	"github.com/planrun/planrun/results"
)

// A stop that names producers and consumers stops the producers first,
// waits for their acks and lets the consumers drain: nothing on its way is
// counted lost. Before, the stops ran concurrently and a consumer stopped
// before the producers' last acks, which were then counted lost (4 runs in
// 12 on a busy machine).
func TestStopAllLosesNothing(t *testing.T) {
	y := `name: stop
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, size: 100B, threads: 4, rate: 20000 } }
  consumer: { consume: { topic: a } }
progress: 0s
steps:
  - start: all
  - sleep: 500ms
  - stop: all
  - assert: consumer.lost == 0 && consumer.in_flight == 0 && consumer.backlog.messages == 0
  - assert: consumer.received == producer.acked
`
	for i := range 12 {
		res := execute(t, context.Background(), y)
		if res.Status != results.Passed {
			st := res.Runs[0].Metrics.Workloads["consumer"]
			t.Fatalf("run %d: %s %s %+v: lost %d, in flight %d, backlog %d", i, res.Status, res.Error, res.Runs[0].Asserts, st.Lost, st.InFlight, st.Backlog.Messages)
		}
	}
}

// A lagging consumer's backlog is in flight, never lost: a consumer stopped
// while the producer goes on (the cold read's backlog phase) stops at once,
// and its backlog at the end of the run, with the broker still holding
// every message, is in flight.
func TestLaggingBacklogIsInFlight(t *testing.T) {
	y := `name: lag
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, size: 100B, rate: 2000, count: 1000 } }
  consumer: { consume: { topic: a } }
progress: 0s
steps:
  - start: all
  - wait: consumer.received >= 100
    timeout: 20s
  - stop: consumer
  - wait: "!producer.running"
    timeout: 20s
  - assert: consumer.lost == 0 && consumer.in_flight == consumer.backlog.messages && consumer.in_flight > 0
`
	res := execute(t, context.Background(), y)
	if res.Status != results.Passed {
		t.Fatalf("%s %s %+v", res.Status, res.Error, res.Runs[0].Asserts)
	}
	st := res.Runs[0].Metrics.Workloads["consumer"]
	if st.Lost != 0 || st.InFlight != st.Backlog.Messages || st.Backlog.Messages == 0 {
		t.Errorf("end of run: lost %d, in flight %d, backlog %d", st.Lost, st.InFlight, st.Backlog.Messages)
	}
}

// What the broker dropped after acknowledging it is lost, proven by its own
// count: the drain ends with the broker holding nothing more for the group.
func TestDroppedIsLost(t *testing.T) {
	y := `name: drop
targets:
  mq: { driver: memory, partitions: 1, drop_every: 10, duplicate_every: 7, reorder_every: 5 }
workloads:
  producer: { produce: { topic: a, size: 100B, rate: 5000, count: 1000 } }
  consumer: { consume: { topic: a } }
progress: 0s
steps:
  - start: [consumer, producer]
  - wait: "!producer.running"
    timeout: 1m
  - stop: all
  - assert: consumer.lost == 100 && consumer.in_flight == 0 && consumer.backlog.messages == 100
`
	res := execute(t, context.Background(), y)
	if res.Status != results.Passed {
		t.Fatalf("%s %s %+v", res.Status, res.Error, res.Runs[0].Asserts)
	}
}
