package steps_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/engine/enginetest"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/results"
)

// A plan with a phase shorter than a second and one in which the consumer
// receives nothing: an assert over a figure they did not measure fails and
// says it is n/a, one over what they measured passes, a wait over a
// figure not measured yet keeps waiting; and the run's invariants (the
// test helper checks them) hold.
func TestAssertOverFiguresNotMeasured(t *testing.T) {
	y := `name: na
targets:
  mq: { driver: memory }
workloads:
  producer:
    produce: { topic: a, size: 100B, threads: 2, rate: 2000 }
  consumer:
    consume: { topic: a, group: g }
progress: 0s
steps:
  - start: producer
    phase: warm
  - sleep: 1200ms
  - sleep: 400ms
    phase: short
  - start: consumer
    phase: read
  - wait: consumer.e2e.p99 >= 0
    timeout: 10s
  - stop: all
  - assert: phases["short"].producer.max_rate > 0
  - assert: phases["warm"].consumer.e2e.p99 < 1000
  # A phase within its last second has one point, the phase itself: its
  # maximum equals its average but for rounding.
  - assert: phases["short"].producer.rate > 1000 && phases["warm"].producer.max_rate >= phases["warm"].producer.rate * (1 - 1e-9)
`
	src, plans, err := plan.Parse("plan.yaml", []byte(y), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res := (&engine.Engine{Out: &out, Version: "test", StopTimeout: 10 * time.Second}).Execute(context.Background(), src, plans)
	t.Log(out.String())
	if res.Status != results.AssertFail {
		t.Fatalf("status %s (%s), want %s", res.Status, res.Error, results.AssertFail)
	}
	enginetest.CheckResult(t, res)
	run := res.Runs[0]
	if len(run.Asserts) != 3 {
		t.Fatalf("asserts %+v", run.Asserts)
	}
	for i, want := range []string{
		`phases.short.producer.max_rate is n/a`,
		`phases.warm.consumer.e2e.p99 is n/a`,
		"",
	} {
		a := run.Asserts[i]
		if want == "" {
			if !a.Passed {
				t.Errorf("%s failed: %s", a.Expr, a.Detail)
			}
			continue
		}
		if a.Passed || !strings.Contains(a.Detail, want) {
			t.Errorf("%s: passed %v, %q; want a failure saying %s", a.Expr, a.Passed, a.Detail, want)
		}
	}
	for _, ph := range run.Metrics.Phases {
		if ph.Name == "short" && (ph.Duration() >= 1 || !metrics.IsNA(ph.Workloads["producer"].MaxRate)) {
			t.Errorf("short phase: %.2f s, max %v", ph.Duration(), ph.Workloads["producer"].MaxRate)
		}
	}
}
