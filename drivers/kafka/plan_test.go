package kafka_test

import (
	"testing"

	_ "github.com/planrun/planrun/drivers/kafka"
	"github.com/planrun/planrun/engine/enginetest"
	_ "github.com/planrun/planrun/steps"
)

// A Kafka producer's one sender keeps up to threads messages in flight
// (with no rate, no linger allowance is added); a set step changes that
// while it runs (the kafka producer takes it, where a producer of threads
// would refuse). With 2 in flight and a 5 ms linger the producer cannot go
// faster than 2 messages per linger; how much
// faster 16 go depends on the machine's spare CPU, so it is only logged.
// The counts are exact and nothing is lost or duplicated.
func TestPlanKafkaProducerThreadsSetWhileRunning(t *testing.T) {
	y := `name: kafka-threads
targets:
  kafka: { driver: kafka, brokers: embedded, topics: { t: { partitions: 4 } } }
workloads:
  producer: { produce: { topic: t, size: 1KiB, threads: 2, count: 3000 } }
  consumer: { consume: { topic: t } }
progress: 0s
steps:
  - start: [consumer, producer]
    phase: two
  - sleep: 1s
  - set: {producer.threads: 16}
    phase: sixteen
  - wait: "!producer.running"
    timeout: 30s
  - wait: consumer.received >= 3000
    timeout: 30s
    phase: drain
  - stop: all
  - assert: producer.acked == 3000 && producer.failed == 0
  - assert: consumer.received == 3000 && consumer.duplicates == 0 && consumer.lost == 0
`
	run := enginetest.Execute(t, y).Runs[0]
	st := run.Metrics.Workloads["producer"]
	if st.Acked != 3000 || st.Sent != 3000 {
		t.Fatalf("producer sent %d, acked %d, want 3000", st.Sent, st.Acked)
	}
	if st.Latency.Count != 3000 {
		t.Fatalf("%d latencies recorded, want 3000", st.Latency.Count)
	}
	rates := map[string]float64{}
	for _, ph := range run.Metrics.Phases {
		rates[ph.Name] = ph.Workloads["producer"].SendRate
	}
	t.Logf("acked msg/s per phase: %v", rates)
	if rates["two"] > 800 {
		t.Errorf("with 2 messages in flight the producer acked %.0f msg/s, more than 2 per linger allow", rates["two"])
	}
}
