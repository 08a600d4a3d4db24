package main

import (
	"bytes"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planrun/planrun/drivers/drivertest"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

// A plan kills the restartable mosquitto of .ci/services.sh mid-run with a
// kill step and starts it again with exec. The events show every client
// dropping and coming back, the outage lasts as long as the broker was
// really away, loss is exact, and the broker's own count of the PUBLISH
// packets it received since the restart ($SYS) matches what was acked.
func TestMosquittoKilledAndRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	brokerURL := realBroker(t, "PLANRUN_TEST_MOSQUITTO_RESTART")
	pidfile := realBroker(t, "PLANRUN_TEST_MOSQUITTO_RESTART_PIDFILE")
	start := realBroker(t, "PLANRUN_TEST_MOSQUITTO_RESTART_START")
	drivertest.LockBroker(t, pidfile) // the mqtt driver's conformance test restarts it too
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	const clients = 20
	plan := `name: mosquitto-restart
targets:
  mq: { driver: mqtt, url: "` + brokerURL + `", reconnect_interval: 250ms }
workloads:
  devices: { target: mq, produce: { topic: planrun/restart, clients: 20, threads: 20, interval: 50ms, qos: 1, connect_first: true, send_timeout: 1m } }
  sink: { target: mq, consume: { topic: planrun/restart, qos: 1 } }
progress: 0s
steps:
  - start: sink
  - start: devices
    phase: before
  - wait: devices.gauges.connected >= 20
    timeout: 30s
  - sleep: 2s
  - kill: { pidfile: "` + pidfile + `", signal: KILL }
    phase: down
  - sleep: 3s
  - shell: "` + start + `"
    phase: back
  - wait: devices.gauges.connected >= 20 && sink.gauges.connected >= 1 && devices.events.reconnects >= 20
    timeout: 1m
  - sleep: 2s
  - stop: devices
  - wait: sink.backlog.messages == 0 || phase.elapsed >= duration("5s")
  - stop: all
  - sleep: 2500ms   # the broker publishes $SYS every second
  - exec: [mosquitto_sub, -h, "` + u.Hostname() + `", -p, "` + u.Port() + `", -C, "1", -W, "10", -t, "$SYS/broker/publish/messages/received"]
    as: sys_received
`
	res, out, stderr := runInline(t, plan)
	r := res.Runs[0]
	m := r.Metrics

	// Every client dropped once and came back once.
	counts := eventCounts(m, "devices")
	if counts[metrics.EventDisconnected] != clients || counts[metrics.EventReconnected] != clients {
		t.Errorf("devices events %v, want %d disconnected and %d reconnected", counts, clients, clients)
	}
	if c := eventCounts(m, "sink"); c[metrics.EventDisconnected] != 1 || c[metrics.EventReconnected] != 1 {
		t.Errorf("sink events %v", c)
	}
	o := outageOf(t, m, "devices")
	if !o.Ended || o.Clients != clients || o.Of != clients || o.Reconnects != clients || o.Phase != "down" {
		t.Errorf("outage %+v", o)
	}
	// The real outage: from the kill to the end of the command that
	// started the broker again (mosquitto -d returns once it listens).
	var killAt, backAt float64
	for _, s := range r.Steps {
		switch {
		case strings.Contains(s.What, "(kill, "):
			killAt = s.StartS
		case strings.Contains(s.What, "(shell, "):
			backAt = s.StartS + s.Duration
		}
	}
	if killAt == 0 || backAt == 0 {
		t.Fatalf("steps: %+v", r.Steps)
	}
	real := backAt - killAt
	if d := o.Duration(); math.Abs(d-real) > 1 {
		t.Errorf("outage %.2f s, the broker was away %.2f s", d, real)
	} else {
		t.Logf("outage %.2f s, the broker was away %.2f s", d, real)
	}

	// Loss is what was acked and never received, message by message.
	dev, sink := m.Workloads["devices"], m.Workloads["sink"]
	// A send whose ack the kill cut off counts as failed, yet the broker
	// may have taken it and passed it on (or the client sent it again
	// after the reconnect): received then holds up to that many messages
	// that were never acked, and acked - received undercounts the loss by
	// as many.
	distinct := sink.Received - sink.Duplicates
	if lo, hi := dev.Acked-distinct, dev.Acked-distinct+dev.Failed; sink.Lost < lo || sink.Lost > hi {
		t.Errorf("lost %d, want acked %d - received %d (+ %d duplicates) = %d, up to %d more for failed sends", sink.Lost, dev.Acked, sink.Received, sink.Duplicates, lo, dev.Failed)
	}
	t.Logf("acked %d, received %d, duplicates %d, lost %d, failed %d", dev.Acked, sink.Received, sink.Duplicates, sink.Lost, dev.Failed)

	// The restarted broker counted a PUBLISH for every message acked
	// since it came back: nothing else publishes to it.
	var ackedSince int64
	after := false
	for _, ph := range m.Phases {
		after = after || ph.Name == "back"
		if after {
			ackedSince += ph.Workloads["devices"].Acked
		}
	}
	sys, ok := r.Probes["sys_received"].(map[string]any)
	if !ok {
		t.Fatalf("probe sys_received: %#v", r.Probes["sys_received"])
	}
	// Sends that failed at the kill may have been sent again after the
	// reconnect: the broker counts those PUBLISH packets too.
	// So can sends whose ack the run's end cut off: every send not acked
	// (sent - acked) bounds the difference.
	if got, ok := sys["value"].(float64); !ok || int64(got) < ackedSince || int64(got) > ackedSince+dev.Sent-dev.Acked {
		t.Errorf("mosquitto received %v PUBLISH packets since its restart, planrun acked %d since then (%d sends not acked)", sys["value"], ackedSince, dev.Sent-dev.Acked)
	}

	// The report says it too.
	report, err := os.ReadFile(filepath.Join(out, "mosquitto-restart.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| devices  | disconnected (", "| down   | devices  |", "clients disconnected ("} {
		if !strings.Contains(string(report)+stderr, want) {
			t.Errorf("report and output lack %q", want)
		}
	}
}

// runInline runs a plan written in the test and returns its result, the
// folder the reports went to and what it printed on stderr; a run that does
// not pass fails the test.
func runInline(t *testing.T, plan string) (*results.Result, string, string) {
	t.Helper()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"--out", out, writePlan(t, plan)}, &stdout, &stderr)
	t.Log(stderr.String())
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stdout.String())
	}
	name := strings.TrimPrefix(strings.SplitN(plan, "\n", 2)[0], "name: ")
	res, err := results.Load(filepath.Join(out, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return res, out, stderr.String()
}

func eventCounts(m metrics.Snapshot, workload string) map[string]int64 {
	out := map[string]int64{}
	for _, e := range m.Events {
		if e.Workload == workload {
			out[e.Event] += e.Count
		}
	}
	return out
}

func outageOf(t *testing.T, m metrics.Snapshot, workload string) metrics.Outage {
	t.Helper()
	var found []metrics.Outage
	for _, o := range m.Outages {
		if o.Workload == workload {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: outages %+v, want one", workload, found)
	}
	return found[0]
}

// plans/mqtt-broker-restart.yaml on its embedded default, scaled down: it
// restarts the broker by itself and its report shows the outage and the
// exact loss.
func TestMQTTBrokerRestartPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"-q", "--out", out, "--set", "clients=20", "--set", "warm=2s", "--set", "down=2s", "--set", "after=2s",
		"plans/mqtt-broker-restart.yaml"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	res, err := results.Load(filepath.Join(out, "mqtt-broker-restart.json"))
	if err != nil {
		t.Fatal(err)
	}
	m := res.Runs[0].Metrics
	o := outageOf(t, m, "devices")
	if !o.Ended || o.Clients != 20 || o.Reconnects != 20 || o.Duration() < 2 || o.Duration() > 4 {
		t.Errorf("outage %+v (%.1f s), want 20 clients down about 2 s", o, o.Duration())
	}
	dev, sink := m.Workloads["devices"], m.Workloads["sink"]
	// A send whose ack the kill cut off counts as failed, yet the broker
	// may have taken it and passed it on (or the client sent it again
	// after the reconnect): received then holds up to that many messages
	// that were never acked, and acked - received undercounts the loss by
	// as many.
	distinct := sink.Received - sink.Duplicates
	if lo, hi := dev.Acked-distinct, dev.Acked-distinct+dev.Failed; sink.Lost < lo || sink.Lost > hi {
		t.Errorf("lost %d, want acked %d - received %d (+ %d duplicates) = %d, up to %d more for failed sends", sink.Lost, dev.Acked, sink.Received, sink.Duplicates, lo, dev.Failed)
	}
	report := stdout.String()
	row := fmt.Sprintf("| %d | %d | %d | %d |", dev.Acked, sink.Received, sink.Lost, sink.Duplicates) // the last columns of "Outage and loss"
	for _, want := range []string{"## Outage and loss", "| outage | devices  |", "| outage | sink     |", row} {
		if !strings.Contains(strings.Join(strings.Fields(report), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}
