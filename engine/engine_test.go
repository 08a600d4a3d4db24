package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/planrun/planrun/engine/enginetest"
	"strings"
	"testing"
	"time"

	_ "github.com/planrun/planrun/drivers/memory"
	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/results"
	_ "github.com/planrun/planrun/steps"
)

func execute(t testing.TB, ctx context.Context, y string) *results.Result {
	t.Helper()
	src, plans, err := plan.Parse("plan.yaml", []byte(y), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	e := &engine.Engine{Out: &out, Version: "test"}
	res := e.Execute(ctx, src, plans)
	t.Log(out.String())
	enginetest.CheckResult(t, res)
	return res
}

// The cold-read procedure against the in-process broker: what the producer
// acked, the consumer receives exactly once across its stop and restart.
func TestEngineColdRead(t *testing.T) {
	y := `name: cold
targets:
  mq: { driver: memory, partitions: 3 }
workloads:
  producer: { produce: { topic: a, size: 100B, threads: 2, rate: 2000, count: 3000 } }
  consumer: { consume: { topic: a, group: g } }
progress: 0s
steps:
  - start: [producer, consumer]
    phase: warm
  - wait: consumer.received >= 500
    timeout: 20s
  # What the consumer receives until it has stopped is the warm phase's:
  # every message is counted in the phase in which it arrived.
  - stop: consumer
  - phase: backlog
  - wait: backlog.messages >= 500
    timeout: 20s
  - start: consumer
    phase: cold-read
  - wait: "!producer.running && consumer.backlog.messages == 0"
    timeout: 20s
  - stop: all
  - assert: consumer.received == producer.acked
  - assert: consumer.duplicates == 0 && consumer.lost == 0
  - assert: phases["backlog"].consumer.received < 200
`
	res := execute(t, context.Background(), y)
	if res.Status != results.Passed {
		t.Fatalf("status %s: %s %+v", res.Status, res.Error, res.Runs[0].Asserts)
	}
	run := res.Runs[0]
	if got := run.Metrics.Workloads["producer"].Acked; got != 3000 {
		t.Errorf("acked %d, want 3000 (count)", got)
	}
	if got := run.Metrics.Workloads["consumer"].Received; got != 3000 {
		t.Errorf("received %d, want 3000", got)
	}
	if names := run.Metrics.PhaseNames(); strings.Join(names, ",") != "warm,backlog,cold-read" {
		t.Errorf("phases %v", names)
	}
	for _, ph := range run.Metrics.Phases {
		if ph.Name == "backlog" && ph.Workloads["consumer"].Backlog.Messages < 500 {
			t.Errorf("backlog at the end of the backlog phase = %d, want >= 500", ph.Workloads["consumer"].Backlog.Messages)
		}
	}
	if p := run.Metrics.Workloads["producer"].Latency; p.Count != 3000 || p.Max <= 0 {
		t.Errorf("latency histogram: %+v", p)
	}
	if run.Metrics.Workloads["consumer"].Lag != 0 {
		t.Logf("broker lag at end: %d (polled once a second)", run.Metrics.Workloads["consumer"].Lag)
	}
}

func TestEngineAssertFailsButRunEnds(t *testing.T) {
	y := `name: a
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, count: 10 } }
progress: 0s
steps:
  - start: producer
  - wait: "!producer.running"
    timeout: 10s
  - assert: producer.acked == 11
    message: off by one
  - assert: producer.acked == 10
`
	res := execute(t, context.Background(), y)
	if res.Status != results.AssertFail {
		t.Fatalf("status %s, want %s", res.Status, results.AssertFail)
	}
	as := res.Runs[0].Asserts
	if len(as) != 2 || as[0].Passed || !as[1].Passed || !strings.Contains(as[0].Detail, "off by one") {
		t.Errorf("asserts %+v", as)
	}
}

func TestEngineStepTimeoutFailsRun(t *testing.T) {
	y := `name: to
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, rate: 100 } }
progress: 0s
steps:
  - start: producer
  - wait: producer.acked > 1000000
    timeout: 300ms
  - sleep: 1h
`
	res := execute(t, context.Background(), y)
	if res.Status != results.Failed {
		t.Fatalf("status %s", res.Status)
	}
	run := res.Runs[0]
	if !strings.Contains(run.Error, "timed out after 300ms") || !strings.Contains(run.FailedStep, "step 2") {
		t.Errorf("error %q at %q", run.Error, run.FailedStep)
	}
	if run.Metrics.Workloads["producer"].Acked == 0 || run.Metrics.Workloads["producer"].Running {
		t.Errorf("what was measured before the failure is kept and workloads are stopped: %+v", run.Metrics.Workloads["producer"])
	}
}

func TestEngineInterrupt(t *testing.T) {
	y := `name: int
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, rate: 1000 } }
progress: 0s
steps:
  - start: producer
  - sleep: 1h
`
	src, plans, err := plan.Parse("plan.yaml", []byte(y), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := &engine.Engine{Version: "test"}
	go func() {
		// Interrupt once the producer has measurably run, as a user would.
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if e.Current().Workloads["producer"].Acked > 10 {
				cancel()
				return
			}
		}
	}()
	start := time.Now()
	res := e.Execute(ctx, src, plans)
	if res.Status != results.Interrupted {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("interrupt took %s", time.Since(start))
	}
	if got := res.Runs[0].Metrics.Workloads["producer"].Acked; got <= 10 {
		t.Errorf("what was measured before the interrupt is kept: acked %d", got)
	}
}

func TestEngineRelayModes(t *testing.T) {
	for _, mode := range []string{"queue", "pool"} {
		t.Run(mode, func(t *testing.T) {
			y := `name: relay
targets:
  mq: { driver: memory }
workloads:
  client: { produce: { topic: in, size: 64B, count: 2000, threads: 4 } }
  server: { relay: { mode: ` + mode + `, threads: 3, from: { topic: in }, to: { topic: out } } }
  receiver: { consume: { topic: out } }
progress: 0s
steps:
  - start: [receiver, server, client]
  - wait: receiver.received >= 2000
    timeout: 20s
  - stop: all
  - assert: server.received == 2000 && server.acked == 2000 && receiver.duplicates == 0
`
			res := execute(t, context.Background(), y)
			if res.Status != results.Passed {
				t.Fatalf("status %s %s %+v", res.Status, res.Error, res.Runs[0].Asserts)
			}
			if e2e := res.Runs[0].Metrics.Workloads["receiver"].E2E; e2e.Count != 2000 {
				t.Errorf("end-to-end latency through the relay: %+v", e2e)
			}
		})
	}
}

func TestEngineMatrixTables(t *testing.T) {
	y := `name: m
matrix:
  threads: [1, 2]
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, count: 100, threads: "${threads}" } }
progress: 0s
steps:
  - start: producer
    phase: produce
  - wait: "!producer.running"
    timeout: 10s
report:
  tables:
    - title: Sweep
      rows: runs
      columns:
        - { name: acked, value: producer.acked }
        - { name: threads, value: vars.threads }
`
	res := execute(t, context.Background(), y)
	if res.Status != results.Passed || len(res.Runs) != 2 {
		t.Fatalf("status %s runs %d", res.Status, len(res.Runs))
	}
	tb := res.Tables[0]
	want := [][]string{{"1", "100", "1"}, {"2", "100", "2"}}
	if strings.Join(tb.Columns, ",") != "threads,acked,threads" || len(tb.Rows) != 2 {
		t.Fatalf("table %+v", tb)
	}
	for i := range want {
		if strings.Join(tb.Rows[i], ",") != strings.Join(want[i], ",") {
			t.Errorf("row %d = %v, want %v", i, tb.Rows[i], want[i])
		}
	}
}

// A count-limited producer in a phase of its own: the wait that notices it
// has finished ends the phase at once, so the phase rate (acked over the
// phase's end - start) is within 0.1% of the producer's own rate as the
// report defines it: acked / duration, duration being last_at - first_at
// (first to last ack; metrics.Stats.Duration, metrics.Snapshot.FinalRates).
// 50,500 messages at 5,000/s take 10.1 s, so the producer finishes between
// two 200 ms polls; a run this long keeps the few milliseconds of opening
// and closing a phase (more under the race detector) well inside 0.1%.
// The phase of a count-limited producer ends when the wait is woken by the
// producer finishing, not by a poll (the poll is an hour): the phase holds
// every ack and ends after the last one. How close its rate comes to the
// producer's own is a figure, measured by BenchmarkPhaseRateOfCountLimitedProducer.
func TestEnginePhaseRateOfCountLimitedProducer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	phase, own := phaseOfCountLimitedProducer(t, ctx, 5000, 5050)
	if own.Acked != 5050 {
		t.Fatalf("producer acked %d, want 5050", own.Acked)
	}
	if phase.Start > own.FirstAt {
		t.Errorf("phase p starts at %.6f s, after the first ack at %.6f s", phase.Start, own.FirstAt)
	}
	if phase.End < own.LastAt {
		t.Errorf("phase p ends at %.6f s, before the last ack at %.6f s", phase.End, own.LastAt)
	}
	// Generous: only a wake, not the hour-long poll, can end it this soon,
	// even on a loaded machine under -race.
	if gap := phase.End - own.LastAt; gap > 5 {
		t.Errorf("phase p ends %.3f s after the last ack: the wait was not woken by the producer finishing", gap)
	}
	if got := phase.Workloads["producer"].Acked; got != own.Acked {
		t.Errorf("phase p holds %d acks, the producer %d", got, own.Acked)
	}
}

// BenchmarkPhaseRateOfCountLimitedProducer reports how far the phase rate of
// a count-limited producer (5,000 msg/s, 50,500 messages) is from the
// producer's own first-to-last rate, in percent (goal: within 0.1%), and
// the time from the last ack to the end of the phase.
func BenchmarkPhaseRateOfCountLimitedProducer(b *testing.B) {
	var diff, gap float64
	for range b.N {
		phase, own := phaseOfCountLimitedProducer(b, context.Background(), 5000, 50500)
		got := phase.Workloads["producer"].Rate
		diff += 100 * (got - own.Rate) / own.Rate
		gap += phase.End - own.LastAt
	}
	b.ReportMetric(diff/float64(b.N), "rate-diff-%")
	b.ReportMetric(1e3*gap/float64(b.N), "ms-after-last-ack")
}

// phaseOfCountLimitedProducer runs a producer of count messages at rate in a
// phase that a wait on its end closes, and returns the phase and the
// producer's own figures.
func phaseOfCountLimitedProducer(t testing.TB, ctx context.Context, rate, count int) (metrics.Phase, metrics.Stats) {
	t.Helper()
	y := fmt.Sprintf(`name: rate
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, size: 100B, rate: %d, count: %d } }
progress: 0s
steps:
  - start: producer
    phase: p
  - wait: "!producer.running"
    poll: 1h
    timeout: 1h
  - assert: producer.acked == %d
    phase: after
`, rate, count, count)
	res := execute(t, ctx, y)
	if res.Status != results.Passed {
		t.Fatalf("status %s: %s %+v", res.Status, res.Error, res.Runs[0].Asserts)
	}
	run := res.Runs[0]
	own := run.Metrics.Workloads["producer"]
	for _, p := range run.Metrics.Phases {
		if p.Name == "p" {
			got := p.Workloads["producer"].Rate
			t.Logf("phase p: %.1f msg/s over %.4f s (%.6f..%.6f); producer: %d acked / %.4f s first to last (%.6f..%.6f) = %.1f msg/s; difference %+.3f%%",
				got, p.Duration(), p.Start, p.End, own.Acked, own.Duration, own.FirstAt, own.LastAt, own.Rate, 100*(got-own.Rate)/own.Rate)
			return p, own
		}
	}
	t.Fatalf("no phase p in %v", run.Metrics.PhaseNames())
	return metrics.Phase{}, own
}

// A wait on a workload's end is woken when the workload finishes: with a
// poll of an hour it can end in time only by being woken. The condition sees
// the finished workload whole, every message acked.
func TestEngineWaitWakesWhenWorkloadFinishes(t *testing.T) {
	y := `name: wake
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, rate: 5000, count: 1000 } }
progress: 0s
steps:
  - start: producer
  - wait: "!producer.running && producer.acked == 1000"
    poll: 1h
    timeout: 1h
`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := execute(t, ctx, y)
	if res.Status != results.Passed {
		t.Fatalf("status %s: %s (the wait was not woken when the producer finished)", res.Status, res.Error)
	}
	run := res.Runs[0]
	wait, last := run.Steps[1], run.Metrics.Workloads["producer"].LastAt
	end := wait.StartS + wait.Duration
	if end < last {
		t.Errorf("the wait ended at %.6f s, before the last ack at %.6f s", end, last)
	}
	t.Logf("the wait ended %.3f ms after the last ack", (end-last)*1e3)
}
