//go:build !race

// rocketmq-client-go has data races of its own when a push consumer shuts
// down while it pulls (it writes its closed flag without synchronisation),
// so the race detector would fail these runs for the client's sake. CI runs
// them without -race (.ci/run); the driver's own tests run with it.

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planrun/planrun/metrics"
)

// Seeds 000 and 004 end to end on the embedded RocketMQ broker, scaled down.
func TestRocketMQPlansEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"cold read", []string{"--set", "backlog=3MB", "--set", "warm=2s", "--set", "cold=30s", "plans/rocketmq-cold-read.yaml"},
			[]string{"## Table 7 - cold read", "| host CPU % (CPU使用率)", "| cold-read |"}},
		{"tps sweep", []string{"--set", "duration=1s", "--set", "threads=32", "--set", "queues=16,32", "plans/rocketmq-tps-sweep.yaml"},
			[]string{"## Produce only", "|      32 |     16 |", "|      32 |     32 |", "## Resources"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"-q", "--out", t.TempDir()}, c.args...), &stdout, &stderr)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
			}
			for _, w := range c.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("report lacks %q:\n%s", w, stdout.String())
				}
			}
		})
	}
}

// The embedded RocketMQ broker stopped for 3 s mid-run and started again on
// its directory: sends fail meanwhile (events and an outage on the
// record), nothing acknowledged is lost, and what the consumer got twice is
// counted as duplicates.
func TestRocketMQPlansBrokerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	plan := `name: rocketmq-restart
targets:
  mq: { driver: rocketmq, nameservers: embedded, send_timeout: 1s }
workloads:
  producer: { target: mq, produce: { topic: restart, rate: 500, threads: 4 } }
  consumer: { target: mq, consume: { topic: restart, group: g } }
progress: 0s
steps:
  - start: consumer
  - start: producer
    phase: before
  - sleep: 3s
  - broker: restart
    target: mq
    down: 3s
    phase: outage
  - sleep: 4s
    phase: after
  - stop: producer
  - wait: consumer.backlog.messages == 0
    timeout: 90s
  - stop: all
  - assert: consumer.lost == 0
`
	res, out, _ := runInline(t, plan)
	m := res.Runs[0].Metrics
	p, c := m.Workloads["producer"], m.Workloads["consumer"]
	// A send that timed out as the broker went down may still have been
	// stored: received, never acked. Nothing acked may be missing.
	if extra := c.Received - c.Duplicates - p.Acked; c.Lost != 0 || extra < 0 || extra > p.Failed {
		t.Errorf("acked %d, received %d (%d duplicates), lost %d", p.Acked, c.Received, c.Duplicates, c.Lost)
	}
	t.Logf("acked %d, received %d, duplicates %d, failed %d", p.Acked, c.Received, c.Duplicates, p.Failed)
	if n := eventCounts(m, "producer")[metrics.EventSendError]; n == 0 || n != p.Failed {
		t.Errorf("%d send_error events for %d failed sends", n, p.Failed)
	}
	o := outageOf(t, m, "producer")
	// The outage opens at the first failed send, so the sends already on
	// their way then (at most one per thread) were meant before it: they
	// failed, but not in the outage. Every later failure is in it.
	if d := o.Duration(); !o.Ended || d < 2 || d > 6 || o.Phase != "outage" || o.Failed > p.Failed || p.Failed-o.Failed > 4 {
		t.Errorf("producer outage %+v (%.1f s), want about 3 s with every failed send but those meant before it (at most 4, one per thread)", o, d)
	}
	report, err := os.ReadFile(filepath.Join(out, "rocketmq-restart.md"))
	if err != nil || !strings.Contains(string(report), "| outage | producer |") {
		t.Errorf("the report has no outage row (%v):\n%s", err, report)
	}
}
