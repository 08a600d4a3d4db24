package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planrun/planrun/engine/enginetest"
	"github.com/planrun/planrun/internal/testenv"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/reporters"
	"github.com/planrun/planrun/results"
)

// A network step degrades the link between the load and the broker
// through the target's proxy, on an embedded mochi-mqtt broker, an
// embedded kfake cluster (Kafka: every broker address metadata names is
// dialed through the proxy too), an embedded nats-server and a real
// redis-server. 200 ms of latency
// raises every send's acknowledgement and every delivery of the fault's
// phase to 200 ms or more (latency we inject, not a speed) while the phase
// before stays below it; the fault drops no connection, so it shows in
// the Events table and not as an outage, and the counts are exact. A cut
// then drops the connections: the workloads record an outage that ends
// when they are back.
func TestNetworkFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	for _, tc := range []struct {
		name, target string
		consume      bool
		cut          bool
	}{
		{name: "mqtt", target: `{ driver: mqtt, url: embedded, proxy: true, reconnect_interval: 250ms }`, consume: true, cut: true},
		{name: "kafka", target: `{ driver: kafka, brokers: embedded, proxy: true, topics: { planrun-net: { partitions: 2 } } }`, consume: true, cut: true},
		{name: "nats", target: `{ driver: nats, url: embedded, proxy: true, reconnect_wait: 250ms }`, consume: true, cut: true},
		{name: "redis", target: `{ driver: redis, addr: "REDIS", proxy: true }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.target
			if tc.name == "redis" {
				target = strings.Replace(target, "REDIS", testenv.Broker(t, "PLANRUN_TEST_REDIS"), 1)
			}
			res, out := enginetest.ExecuteOutput(t, networkPlan(target, tc.consume, tc.cut))
			checkNetworkFaults(t, res.Runs[0], tc.consume, tc.cut)
			if !strings.Contains(out, "network mq: latency 200ms") || !strings.Contains(out, "network mq: restored (was latency 200ms)") {
				t.Errorf("output does not say when the fault began and ended")
			}
		})
	}
}

func networkPlan(target string, consume, cut bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, `name: network-fault
targets:
  mq: %s
workloads:
  pub: { target: mq, produce: { topic: planrun-net, size: 100B, threads: 8, rate: 20 } }
`, target)
	if consume {
		b.WriteString("  sub: { target: mq, consume: { topic: planrun-net, group: net } }\n")
	}
	b.WriteString("progress: 0s\nsteps:\n")
	if consume {
		b.WriteString("  - start: sub\n  - wait: sub.gauges.connected >= 1 || phase.elapsed >= duration(\"3s\")\n")
	}
	b.WriteString(`  - start: pub
    phase: before
  - sleep: 2s
  - network: { target: mq, latency: 200ms, for: 2s }
    phase: degraded
  - sleep: 1s
    phase: after
`)
	if cut {
		b.WriteString(`  - network: { target: mq, cut: true, for: 1s }
    phase: cut
  - wait: pub.events.reconnects >= pub.events.disconnects && pub.events.disconnects >= 1
    timeout: 1m
    phase: recovered
  - sleep: 1s
`)
	}
	b.WriteString("  - stop: pub\n")
	if consume {
		b.WriteString("  - wait: sub.backlog.messages == 0 || phase.elapsed >= duration(\"10s\")\n    timeout: 15s\n")
	}
	b.WriteString("  - stop: all\n")
	return b.String()
}

func checkNetworkFaults(t *testing.T, run results.Run, consume, cut bool) {
	t.Helper()
	m := run.Metrics
	phases := map[string]metrics.Phase{}
	for _, ph := range m.Phases {
		phases[ph.Name] = ph
	}
	before, degraded := phases["before"].Workloads["pub"], phases["degraded"].Workloads["pub"]
	t.Logf("send latency ms: before p50 %.1f p99 %.1f (%d acked); degraded p50 %.1f p99 %.1f (%d acked)",
		before.Latency.P50, before.Latency.P99, before.Acked, degraded.Latency.P50, degraded.Latency.P99, degraded.Acked)
	if before.Acked == 0 || degraded.Acked == 0 {
		t.Fatalf("acked %d before and %d during the fault", before.Acked, degraded.Acked)
	}
	if degraded.Latency.P50 < 200 || degraded.Latency.P99 < 200 {
		t.Errorf("with 200 ms of latency on the link, send p50 %.1f ms and p99 %.1f ms", degraded.Latency.P50, degraded.Latency.P99)
	}
	if before.Latency.P99 >= 200 {
		t.Errorf("before the fault, send p99 is already %.1f ms", before.Latency.P99)
	}
	if consume {
		sb, sd := phases["before"].Workloads["sub"], phases["degraded"].Workloads["sub"]
		t.Logf("end-to-end ms: before p99 %.1f (%d received); degraded p50 %.1f p99 %.1f (%d received)", sb.E2E.P99, sb.Received, sd.E2E.P50, sd.E2E.P99, sd.Received)
		if sd.Received == 0 || sd.E2E.P50 < 200 || sd.E2E.P99 < 200 {
			t.Errorf("with 200 ms of latency on the link, %d received with end-to-end p50 %.1f ms, p99 %.1f ms", sd.Received, sd.E2E.P50, sd.E2E.P99)
		}
		if sb.E2E.P99 >= 200 {
			t.Errorf("before the fault, end-to-end p99 is already %.1f ms", sb.E2E.P99)
		}
	}
	pub := m.Workloads["pub"]
	if !cut {
		if pub.Failed != 0 || pub.Acked != pub.Sent {
			t.Errorf("pub sent %d, acked %d, failed %d", pub.Sent, pub.Acked, pub.Failed)
		}
	}
	if consume && !cut {
		sub := m.Workloads["sub"]
		if sub.Received != pub.Acked || sub.Lost != 0 || sub.Duplicates != 0 {
			t.Errorf("sub received %d of %d acked, lost %d, duplicates %d", sub.Received, pub.Acked, sub.Lost, sub.Duplicates)
		}
	}
	// The latency fault is an event of its own, in the Events table.
	for _, w := range []string{"pub", "sub"} {
		if w == "sub" && !consume {
			continue
		}
		c := eventCounts(m, w)
		wantFaults := int64(1)
		if cut {
			wantFaults = 2
		}
		if c[metrics.EventNetworkFault] != wantFaults || c[metrics.EventNetworkRestored] != wantFaults {
			t.Errorf("%s: events %v, want %d network faults and as many restored", w, c, wantFaults)
		}
	}
	_, rows := reporters.EventsTable(&run)
	var table strings.Builder
	for _, r := range rows {
		table.WriteString(strings.Join(r, " | ") + "\n")
	}
	if !strings.Contains(table.String(), "pub | network fault (latency 200ms) | 1") {
		t.Errorf("the Events table has no row for the latency fault:\n%s", table.String())
	}
	for _, o := range m.Outages {
		if o.Phase == "before" || o.Phase == "degraded" {
			t.Errorf("outage in phase %s: a latency fault drops no connection: %+v", o.Phase, o)
		}
	}
	if !cut {
		return
	}
	o := outageOf(t, m, "pub")
	t.Logf("cut: outage %+v", o)
	if !o.Ended || o.Phase != "cut" || o.Disconnects == 0 || o.Reconnects == 0 {
		t.Errorf("the cut's outage: %+v", o)
	}
	if !strings.Contains(table.String(), "network fault (link cut)") {
		t.Errorf("the Events table has no row for the cut:\n%s", table.String())
	}
}

// plans/mqtt-degraded-link.yaml on its embedded default, scaled down: the
// latency phase's send and end-to-end p99 are at least the latency the
// plan injects, the cut opens an outage that ends, and the subscriber's
// persistent session loses nothing.
func TestMQTTDegradedLinkPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"-q", "--out", out, "--set", "clients=10", "--set", "warm=2s", "--set", "fault=2s", "--set", "cut=1s",
		"--set", "after=1s", "--set", "bandwidth=1kB/s", "plans/mqtt-degraded-link.yaml"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	res, err := results.Load(filepath.Join(out, "mqtt-degraded-link.json"))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckResult(t, res)
	m := res.Runs[0].Metrics
	for _, ph := range m.Phases {
		dev, sink := ph.Workloads["devices"], ph.Workloads["sink"]
		t.Logf("%-9s send p99 %7.1f ms, end-to-end p99 %7.1f ms, acked %d, received %d", ph.Name, dev.Latency.P99, sink.E2E.P99, dev.Acked, sink.Received)
		switch ph.Name {
		case "baseline":
			if dev.Latency.P99 >= 200 || sink.E2E.P99 >= 200 {
				t.Errorf("baseline: send p99 %.1f ms, end-to-end p99 %.1f ms: already 200 ms or more", dev.Latency.P99, sink.E2E.P99)
			}
		case "latency":
			if dev.Latency.P99 < 200 || sink.E2E.P99 < 200 {
				t.Errorf("200ms ±20ms of latency: send p99 %.1f ms, end-to-end p99 %.1f ms", dev.Latency.P99, sink.E2E.P99)
			}
		}
	}
	o := outageOf(t, m, "devices")
	if !o.Ended || o.Phase != "cut" || o.Clients != 10 || o.Reconnects != 10 {
		t.Errorf("the cut's outage: %+v", o)
	}
	if sink := m.Workloads["sink"]; sink.Lost != 0 {
		t.Errorf("the persistent session lost %d messages", sink.Lost)
	}
	report := stdout.String()
	for _, want := range []string{"## Latency and loss by link condition", "network fault (latency 200ms ±20ms)", "network fault (bandwidth 1KB/s)", "network fault (link cut)"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// A run over workers (--workers) refuses a network step before it
// contacts a worker: the proxy is in the process that runs the workloads.
func TestNetworkStepRefusedOnWorkers(t *testing.T) {
	y := "name: n\ntargets:\n  mq: { driver: mqtt, url: embedded, proxy: true }\nworkloads:\n  w: { produce: { topic: a } }\nsteps:\n  - network: { target: mq, cut: true }\n"
	var stdout, stderr bytes.Buffer
	code := run([]string{"--workers", "127.0.0.1:1", "--out", t.TempDir(), writePlan(t, y)}, &stdout, &stderr)
	if want := "network faults act on the proxy in the process that runs the workloads"; code != 2 || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), want)
	}
}

// The memory driver has no network: a network step on it is refused when
// the plan loads, at its place, with exit code 2.
func TestNetworkStepOnMemoryExits2(t *testing.T) {
	y := "name: n\ntargets:\n  mem: { driver: memory }\nworkloads:\n  w: { produce: { topic: a } }\nsteps:\n  - network: { target: mem, latency: 200ms }\n"
	var stdout, stderr bytes.Buffer
	code := run([]string{"--out", t.TempDir(), writePlan(t, y)}, &stdout, &stderr)
	if want := `.yaml:7:24: network: target "mem" (driver memory) has no network link to degrade`; code != 2 || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), want)
	}
}

// What the proxy cannot carry is refused when the target opens.
func TestProxyRefusedAtOpen(t *testing.T) {
	for _, tc := range []struct{ target, want string }{
		{`{ driver: mqtt, url: "ws://127.0.0.1:1/mqtt", proxy: true }`, "mqtt: proxy: works with tcp and ssl URLs, not websockets"},
		{`{ driver: mqtt, url: embedded, proxy: true, source_addrs: [127.0.0.1] }`, "mqtt: proxy: and source_addrs do not go together"},
	} {
		y := "name: n\ntargets:\n  mq: " + tc.target + "\nworkloads:\n  w: { produce: { topic: a } }\nsteps:\n  - start: w\n"
		var stdout, stderr bytes.Buffer
		code := run([]string{"--out", t.TempDir(), writePlan(t, y)}, &stdout, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %q", tc.target, code, stderr.String(), tc.want)
		}
	}
}
