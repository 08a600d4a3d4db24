package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planrun/planrun/internal/testenv"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

// plans/nats-jetstream-cold-read.yaml on the embedded server and on
// Debian's nats-server (NATS_URL), scaled down: the backlog builds up with
// the consumer stopped and is read back; every acknowledged message arrives.
func TestNATSColdReadPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	t.Run("embedded", func(t *testing.T) { natsColdRead(t) })
	t.Run("nats-server", func(t *testing.T) {
		t.Setenv("NATS_URL", testenv.Broker(t, "PLANRUN_TEST_NATS"))
		natsColdRead(t)
	})
}

func natsColdRead(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"-q", "--out", out, "--set", "backlog=2MB", "--set", "warm=2s", "--set", "cold=2m", "--set", "rate=2000",
		"plans/nats-jetstream-cold-read.yaml"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	for _, w := range []string{"## Cold read", "| consume msg/s", "| cold-read |"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("report lacks %q:\n%s", w, stdout.String())
		}
	}
	res, err := results.Load(filepath.Join(out, "nats-jetstream-cold-read.json"))
	if err != nil {
		t.Fatal(err)
	}
	m := res.Runs[0].Metrics
	p, c := m.Workloads["producer"], m.Workloads["consumer"]
	if c.Lost != 0 || p.Failed != 0 || c.Received-c.Duplicates < p.Acked {
		t.Errorf("acked %d, failed %d, received %d (%d duplicates), lost %d", p.Acked, p.Failed, c.Received, c.Duplicates, c.Lost)
	}
	// The backlog was there when the cold read began: 2 MB of 1 KiB messages.
	if b := m.Phases[1].Workloads["consumer"].Backlog; b.Bytes < 2_000_000 {
		t.Errorf("backlog phase ended with %d bytes behind, want 2 MB or more", b.Bytes)
	}
	t.Logf("acked %d, received %d, duplicates %d", p.Acked, c.Received, c.Duplicates)
}

// The embedded server restarted mid-run by a broker step: producer and
// consumer report the loss and the return, the outage is on the record,
// and of the file stream nothing acknowledged is lost.
func TestNATSEmbeddedRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	plan := `name: nats-restart
targets:
  mq:
    driver: nats
    url: embedded
    reconnect_wait: 100ms
    streams:
      RESTART: { subjects: [restart.>], storage: file }
workloads:
  producer: { target: mq, produce: { topic: restart.a, rate: 500, threads: 4, jetstream: true, send_timeout: 1s } }
  consumer: { target: mq, consume: { topic: "restart.*", group: g, jetstream: true } }
progress: 0s
steps:
  - start: consumer
  - start: producer
    phase: before
  - sleep: 2s
  - broker: restart
    target: mq
    down: 2s
    phase: outage
  - wait: producer.events.reconnects >= 1 && consumer.events.reconnects >= 1
    timeout: 30s
  - sleep: 2s
    phase: after
  - stop: producer
  - wait: consumer.backlog.messages == 0
    timeout: 60s
  - stop: all
  - assert: consumer.lost == 0
`
	res, out, _ := runInline(t, plan)
	m := res.Runs[0].Metrics
	p, c := m.Workloads["producer"], m.Workloads["consumer"]
	// A publish whose ack the restart cut off fails, yet the stream may
	// have stored it: received beyond acked is bounded by the failed sends.
	if extra := c.Received - c.Duplicates - p.Acked; c.Lost != 0 || extra < 0 || extra > p.Failed {
		t.Errorf("acked %d, received %d (%d duplicates), lost %d, failed %d", p.Acked, c.Received, c.Duplicates, c.Lost, p.Failed)
	}
	t.Logf("acked %d, received %d, duplicates %d, failed %d", p.Acked, c.Received, c.Duplicates, p.Failed)
	for _, w := range []string{"producer", "consumer"} {
		if ev := eventCounts(m, w); ev[metrics.EventDisconnected] != 1 || ev[metrics.EventReconnected] != 1 {
			t.Errorf("%s events %v, want one disconnect and one reconnect", w, ev)
		}
	}
	o := outageOf(t, m, "producer")
	if d := o.Duration(); !o.Ended || d < 1.5 || d > 10 || o.Phase != "outage" {
		t.Errorf("producer outage %+v (%.1f s), want about 2 s in phase outage", o, d)
	}
	report, err := os.ReadFile(filepath.Join(out, "nats-restart.md"))
	if err != nil || !strings.Contains(string(report), "| outage | producer |") {
		t.Errorf("the report has no outage row (%v):\n%s", err, report)
	}
}

// A malformed NATS option is a load error at its place in the file.
func TestNATSOptionErrors(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"ack policy", `consume: { topic: a, jetstream: true, ack_policy: sometimes }`, `plan.yaml:7:28: workload "w" consume: nats: ack_policy "sometimes": use explicit, all, none`},
		{"type", `consume: { topic: a, jetstream: true, max_ack_pending: lots }`, "plan.yaml:7:"},
		{"unknown key", `consume: { topic: a, jetstrem: true }`, "plan.yaml:7:"},
		{"core with js keys", `consume: { topic: a, batch: 10 }`, "plan.yaml:7:28: workload \"w\" consume: nats: batch: JetStream settings; add jetstream: true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := `name: bad
targets:
  n:
    driver: nats
    url: embedded
workloads:
  w: { target: n, ` + c.yaml + ` }
steps:
  - start: w
`
			var stdout, stderr bytes.Buffer
			code := run([]string{"validate", writePlan(t, plan)}, &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant %q", code, stderr.String(), c.want)
			}
		})
	}
}
