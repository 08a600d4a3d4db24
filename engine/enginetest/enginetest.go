// Package enginetest runs plans written inline in tests.
package enginetest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/results"
)

// Execute runs the whole plan y (steps and drivers must be registered by
// the caller's imports), logs what it printed and fails the test unless the
// run passed.
func Execute(t testing.TB, y string) *results.Result {
	t.Helper()
	res, _ := ExecuteOutput(t, y)
	return res
}

// ExecuteOutput is Execute that also returns what the run printed.
func ExecuteOutput(t testing.TB, y string) (*results.Result, string) {
	t.Helper()
	src, plans, err := plan.Parse("plan.yaml", []byte(y), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	e := &engine.Engine{Out: &out, Version: "test", StopTimeout: 10 * time.Second}
	res := e.Execute(context.Background(), src, plans)
	t.Log(out.String())
	if res.Status != results.Passed {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	CheckResult(t, res)
	return res, out.String()
}

// CheckResult fails the test for every invariant res does not hold (see
// results.Check): every plan a test runs checks that its figures add up.
func CheckResult(t testing.TB, res *results.Result) {
	t.Helper()
	for _, v := range res.Check().Violations {
		t.Errorf("figures do not add up: %s", v)
	}
}

// PhaseChangesPlan is a plan that changes phase every few milliseconds
// while a producer and a consumer run at full speed against a memory
// broker that fails, drops, duplicates and reorders messages.
func PhaseChangesPlan(phases int) string {
	var b strings.Builder
	b.WriteString(`name: phases
targets:
  mq: { driver: memory, partitions: 3, fail_every: 7, drop_every: 17, duplicate_every: 11, reorder_every: 13 }
workloads:
  producer: { produce: { topic: a, size: 64B, threads: 4, rate: 5000 } }
  consumer: { consume: { topic: a, group: g } }
progress: 0s
steps:
  - start: [producer, consumer]
    phase: p0
`)
	for i := 1; i < phases; i++ {
		fmt.Fprintf(&b, "  - sleep: %dms\n    phase: p%d\n", 20+i%3*15, i)
	}
	b.WriteString("  - stop: producer\n  - sleep: 200ms\n    phase: drain\n  - stop: consumer\n")
	return b.String()
}

// AssertPhasesAddUp fails t unless every count of every workload summed
// over the phases equals the run's, with one latency per message.
func AssertPhasesAddUp(t *testing.T, res *results.Result) {
	t.Helper()
	for _, run := range res.Runs {
		for name, total := range run.Metrics.Workloads {
			var sum metrics.Stats
			for _, ph := range run.Metrics.Phases {
				s := ph.Workloads[name]
				sum.Sent += s.Sent
				sum.Acked += s.Acked
				sum.Failed += s.Failed
				sum.Received += s.Received
				sum.Distinct += s.Distinct
				sum.Duplicates += s.Duplicates
				sum.Latency.Count += s.Latency.Count
				sum.E2E.Count += s.E2E.Count
				if s.Latency.Count != s.Acked || s.E2E.Count != s.Received-s.Untracked {
					t.Errorf("%s, phase %q: %d latencies for %d acked, %d end-to-end for %d received", name, ph.Name, s.Latency.Count, s.Acked, s.E2E.Count, s.Received-s.Untracked)
				}
			}
			got := []int64{sum.Sent, sum.Acked, sum.Failed, sum.Received, sum.Distinct, sum.Duplicates, sum.Latency.Count, sum.E2E.Count}
			want := []int64{total.Sent, total.Acked, total.Failed, total.Received, total.Distinct, total.Duplicates, total.Latency.Count, total.E2E.Count}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: phases sum to sent, acked, failed, received, distinct, duplicates, latencies, e2e latencies %v; the run has %v", name, got, want)
			}
		}
	}
}
