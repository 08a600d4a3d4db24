package drivertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/engine/enginetest"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/results"
	_ "github.com/planrun/planrun/steps" // the steps the suite's plans use
)

// Run runs every conformance check that applies to the suite's driver as
// a subtest of t. A check that does not apply (a capability the driver
// does not declare, a broker that cannot be restarted here) is skipped
// with the reason, so `go test -v` lists what was checked.
func Run(t *testing.T, s Suite) {
	t.Helper()
	d, ok := drivers.Lookup(s.Driver)
	if !ok {
		t.Fatalf("drivertest: no driver registered as %q (known: %s)", s.Driver, strings.Join(drivers.Names(), ", "))
	}
	c, ok := d.(drivers.Capable)
	if !ok {
		t.Fatalf("drivertest: driver %q declares no capabilities: pass drivers.Capabilities to drivers.Define", s.Driver)
	}
	if s.Start == nil {
		t.Fatalf("drivertest: suite for %q has no Start", s.Driver)
	}
	if s.Messages <= 0 {
		s.Messages = 2000
	}
	r := &runner{Suite: s, caps: c.Capabilities(), drv: d}
	t.Run("declared", r.declared)
	t.Run("options", r.options)
	t.Run("malformed", r.malformed)
	t.Run("count", r.count)
	t.Run("consumer-restart", r.consumerRestart)
	t.Run("broker-restart", r.brokerRestart)
	t.Run("relay", r.relay)
	t.Run("refused", r.refused)
	t.Run("credentials", r.credentials)
}

type runner struct {
	Suite
	caps drivers.Capabilities
	drv  drivers.Driver
}

// need skips the check unless the driver declares the capability.
func (r *runner) need(t *testing.T, field string) {
	t.Helper()
	if !r.caps.Has(field) {
		t.Skipf("%s does not declare %s", r.Driver, field)
	}
}

// topic returns a topic name no earlier run against a real broker used.
func topic(check string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "planrun_conformance_" + strings.ReplaceAll(check, "-", "_") + "_" + hex.EncodeToString(b)
}

// target is the plan's targets section for target keys o.
func (r *runner) target(o Options) string {
	return "targets:\n  " + TargetName + ": " + Options{"driver": r.Driver}.merge(o).flow() + "\n"
}

func (r *runner) produce(topic string, more Options) string {
	return Options{"topic": topic}.merge(r.Produce, more).flow()
}

func (r *runner) consume(topic string, more Options) string {
	return Options{"topic": topic}.merge(r.Consume, more).flow()
}

// execute runs plan y through the engine and returns its result and
// what it printed; unlike a run from the command line it does not fail
// the test on a failed run.
func execute(t testing.TB, y string) (*results.Result, string) {
	t.Helper()
	src, plans, err := plan.Parse("plan.yaml", []byte(y), plan.Options{})
	if err != nil {
		t.Fatalf("the suite's plan does not load: %v\n%s", err, y)
	}
	var out bytes.Buffer
	e := &engine.Engine{Out: &out, Version: "conformance", StopTimeout: 20 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res := e.Execute(ctx, src, plans)
	// Whatever a check asserts, the result's figures must add up.
	enginetest.CheckResult(t, res)
	return res, out.String()
}

// mustPass runs y and fails the test unless the run passed.
func mustPass(t testing.TB, y string) metrics.Snapshot {
	t.Helper()
	res, out := execute(t, y)
	if res.Status != results.Passed {
		t.Fatalf("run %s: %s\nplan:\n%s\noutput:\n%s", res.Status, res.Error, y, out)
	}
	if len(res.Runs) != 1 {
		t.Fatalf("%d runs, want 1", len(res.Runs))
	}
	return res.Runs[0].Metrics
}

// declared checks the declared capabilities against the driver and its
// targets: what a target can do it declares, and what it declares it can.
func (r *runner) declared(t *testing.T) {
	if cc, ok := r.drv.(drivers.ConnectCapable); (ok && cc.CanConnect()) != r.caps.Connect {
		t.Errorf("declares connect %v, but its targets hold idle connections: %v", r.caps.Connect, ok && cc.CanConnect())
	}
	env := r.Start(t)
	_, plans, err := plan.Parse("plan.yaml", []byte("name: declared\n"+r.target(env.Target)+
		"workloads:\n  producer: {target: t, produce: "+r.produce("x", nil)+"}\nsteps: [{sleep: 0s}]\n"), plan.Options{})
	if err != nil {
		t.Fatalf("target keys %v do not load: %v", env.Target, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tg, err := plans[0].Targets[0].Open(ctx)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer tg.Close()
	for _, c := range []struct {
		field string
		has   bool
	}{
		{"Lag", is[drivers.LagReader](tg)},
		{"Topics", is[drivers.TopicCreator](tg)},
		{"Probe", is[drivers.Prober](tg)},
	} {
		if r.caps.Has(c.field) != c.has {
			t.Errorf("declares %s %v, but its target says %v", c.field, r.caps.Has(c.field), c.has)
		}
	}
	if env.Broker != nil && !r.caps.Restart {
		t.Errorf("the suite can restart its broker but %s does not declare Restart", r.Driver)
	}
	t.Logf("%s declares: %s", r.Driver, r.caps)
}

func is[I any](t drivers.Target) bool {
	_, ok := drivers.As[I](t)
	return ok
}

// count sends Messages messages and, where the driver consumes, receives
// them: exact counts, nothing lost or duplicated by identity, bytes equal.
func (r *runner) count(t *testing.T) {
	env := r.Start(t)
	n := r.Messages
	tp := topic("count")
	y := "name: conformance-count\n" + r.target(env.Target) + "workloads:\n" +
		"  producer: {target: t, produce: " + r.produce(tp, Options{"size": 100, "threads": 4, "count": n}) + "}\n"
	if r.caps.Consume {
		y += "  consumer: {target: t, consume: " + r.consume(tp, nil) + "}\n"
	}
	y += "progress: 0s\nsteps:\n"
	if r.caps.Consume {
		y += "  - start: consumer\n"
	}
	y += "  - start: producer\n  - wait: '!producer.running'\n    timeout: 2m\n"
	if r.caps.Consume {
		y += fmt.Sprintf("  - wait: consumer.received >= %d\n    timeout: 1m\n", n)
	}
	y += "  - stop: all\n"
	m := mustPass(t, y)
	p := m.Workloads["producer"]
	if p.Sent != int64(n) || p.Acked != int64(n) || p.Failed != 0 {
		t.Errorf("producer sent %d, acked %d, failed %d; want %d, %d, 0", p.Sent, p.Acked, p.Failed, n, n)
	}
	if p.BytesAcked != int64(n)*100 {
		t.Errorf("producer acked %d bytes, want %d", p.BytesAcked, n*100)
	}
	if p.Latency.Count != int64(n) {
		t.Errorf("%d latencies recorded, want %d", p.Latency.Count, n)
	}
	if r.Stored != nil {
		if got := r.Stored(t, env, tp); got != p.Acked {
			t.Errorf("the broker holds %d messages on %s, the producer acked %d", got, tp, p.Acked)
		}
	}
	if !r.caps.Consume {
		return
	}
	c := m.Workloads["consumer"]
	if c.Received != int64(n) || c.Lost != 0 || c.Duplicates != 0 || c.BytesReceived != int64(n)*100 {
		t.Errorf("consumer received %d (%d bytes), lost %d, duplicates %d; want %d (%d bytes), 0, 0",
			c.Received, c.BytesReceived, c.Lost, c.Duplicates, n, n*100)
	}
	if c.E2E.Count != int64(n) {
		t.Errorf("%d end-to-end latencies, want %d", c.E2E.Count, n)
	}
}

// consumerRestart sends a third of the messages with the consumer
// running, a third with it stopped, and a third after it started again.
// A driver with committed positions delivers all three thirds once; one
// without delivers the first and last, and the middle third is counted
// lost, exactly.
func (r *runner) consumerRestart(t *testing.T) {
	r.need(t, "Consume")
	env := r.Start(t)
	a := r.Messages / 3
	tp := topic("restart")
	y := "name: conformance-consumer-restart\n" + r.target(env.Target) + "workloads:\n"
	for _, p := range []string{"before", "while_stopped", "after"} {
		y += "  " + p + ": {target: t, produce: " + r.produce(tp, Options{"size": 100, "threads": 4, "count": a}) + "}\n"
	}
	var extra Options
	if r.caps.Positions {
		extra = r.Positions
	}
	want := 2 * a
	done := fmt.Sprintf("consumer.received >= %d", want)
	if r.caps.Positions {
		// Every message acknowledged has arrived (duplicates aside).
		want, done = 3*a, "consumer.backlog.messages == 0"
	}
	y += "  consumer: {target: t, consume: " + r.consume(tp, extra) + "}\n" +
		"progress: 0s\nsteps:\n" +
		"  - start: consumer\n" +
		"  - start: before\n" +
		"  - wait: '!before.running'\n    timeout: 1m\n" +
		fmt.Sprintf("  - wait: consumer.received >= %d\n    timeout: 1m\n", a) +
		"  - stop: consumer\n" +
		"  - start: while_stopped\n" +
		"  - wait: '!while_stopped.running'\n    timeout: 1m\n" +
		"  - start: consumer\n" +
		"  - start: after\n" +
		"  - wait: '!after.running'\n    timeout: 1m\n" +
		"  - wait: " + done + "\n    timeout: 1m\n" +
		"  - stop: all\n"
	m := mustPass(t, y)
	c := m.Workloads["consumer"]
	for _, p := range []string{"before", "while_stopped", "after"} {
		if st := m.Workloads[p]; st.Acked != int64(a) || st.Failed != 0 {
			t.Errorf("%s acked %d, failed %d; want %d, 0", p, st.Acked, st.Failed, a)
		}
	}
	if !r.caps.Positions {
		if c.Received != int64(want) || c.Duplicates != 0 || c.Lost != int64(a) {
			t.Errorf("consumer received %d, duplicates %d, lost %d; want %d, 0, %d (no committed positions: what was sent while it was stopped is lost)",
				c.Received, c.Duplicates, c.Lost, want, a)
		}
		return
	}
	// Every message once, and nothing lost. A position committed after
	// the handling (Kafka, RocketMQ) or an MQTT session's unacknowledged
	// QoS 1 messages may deliver again what was handled just before the
	// stop (at least once): such duplicates are counted, and can only be
	// messages sent before the stop.
	if c.Received-c.Duplicates != int64(want) || c.Lost != 0 || c.Duplicates > int64(a) {
		t.Errorf("consumer received %d, duplicates %d, lost %d; want %d distinct, 0 lost, at most %d duplicates",
			c.Received, c.Duplicates, c.Lost, want, a)
	}
	if c.Duplicates > 0 {
		t.Logf("%d messages delivered again after the restart", c.Duplicates)
	}
}

// brokerRestart stops the broker while a paced producer (and a consumer)
// run and starts it again: every workload records its connection lost and
// back and an outage that ended; loss is counted (none on a durable
// broker).
func (r *runner) brokerRestart(t *testing.T) {
	r.need(t, "Restart")
	env := r.Start(t)
	if env.Broker == nil {
		t.Skipf("the suite cannot stop and start this broker")
	}
	if env.Broker.pidfile != "" {
		LockBroker(t, env.Broker.pidfile)
	}
	tp := topic("outage")
	y := "name: conformance-broker-restart\n" + r.target(env.Target) + "workloads:\n" +
		"  producer: {target: t, produce: " + r.produce(tp, Options{"size": 100, "threads": 8, "rate": 200}) + "}\n"
	waitBack := "producer.events.reconnects >= 1"
	if r.caps.Consume {
		y += "  consumer: {target: t, consume: " + r.consume(tp, nil) + "}\n"
	}
	y += "progress: 0s\nsteps:\n"
	if r.caps.Consume {
		y += "  - start: consumer\n"
	}
	y += "  - start: producer\n    phase: before\n" +
		"  - wait: producer.acked >= 200\n    timeout: 30s\n" +
		"  - " + env.Broker.Stop + "\n" +
		"  - phase: down\n" +
		"  - sleep: 2s\n" +
		"  - " + env.Broker.Start + "\n" +
		"  - phase: back\n" +
		"  - wait: " + waitBack + "\n    timeout: 1m\n" +
		"  - wait: producer.acked >= 600\n    timeout: 1m\n" +
		"  - stop: producer\n"
	if r.caps.Consume {
		// A durable broker delivers all it acknowledged (a pull consumer
		// may take a rebalance interval to resume); another may have lost
		// what it held.
		settle := "5s"
		if env.Broker.Durable {
			settle = "45s"
		}
		y += "  - wait: consumer.backlog.messages == 0 || phase.elapsed >= duration(\"" + settle + "\")\n"
	}
	y += "  - stop: all\n"
	m := mustPass(t, y)
	// The producer's clients hold connections all along: each must have
	// dropped and come back. A consumer may not hold one while idle (a
	// pull consumer reconnects when it next pulls): its events are logged
	// and its count must come out right.
	for _, w := range []string{"producer"} {
		st := m.Workloads[w]
		if st.Events.Disconnects < 1 || st.Events.Reconnects < 1 {
			t.Errorf("%s: %d disconnects, %d reconnects; want at least one each", w, st.Events.Disconnects, st.Events.Reconnects)
		}
		var outs []metrics.Outage
		for _, o := range m.Outages {
			if o.Workload == w {
				outs = append(outs, o)
			}
		}
		if len(outs) == 0 {
			t.Errorf("%s: no outage recorded", w)
		}
		for _, o := range outs {
			if !o.Ended {
				t.Errorf("%s: outage %+v did not end", w, o)
			}
		}
	}
	p := m.Workloads["producer"]
	t.Logf("producer sent %d, acked %d, failed %d; outage %.2f s", p.Sent, p.Acked, p.Failed, p.Outage.Seconds)
	if !r.caps.Consume {
		return
	}
	c := m.Workloads["consumer"]
	t.Logf("consumer received %d, duplicates %d, lost %d; %d disconnects, %d reconnects", c.Received, c.Duplicates, c.Lost, c.Events.Disconnects, c.Events.Reconnects)
	if c.Lost < 0 || c.Lost > p.Acked {
		t.Errorf("consumer lost %d of %d acked", c.Lost, p.Acked)
	}
	if c.Received-c.Duplicates > p.Sent {
		t.Errorf("consumer received %d distinct messages, more than the %d sent", c.Received-c.Duplicates, p.Sent)
	}
	if env.Broker.Durable && c.Lost != 0 {
		t.Errorf("a durable broker lost %d acknowledged messages", c.Lost)
	}
}

// relay sends through a relay that reads from and publishes to the
// driver's target: every message arrives once at the end.
func (r *runner) relay(t *testing.T) {
	r.need(t, "Relay")
	env := r.Start(t)
	n := r.Messages
	in, out := topic("relay_in"), topic("relay_out")
	y := "name: conformance-relay\n" + r.target(env.Target) + "workloads:\n" +
		"  producer: {target: t, produce: " + r.produce(in, Options{"size": 100, "threads": 4, "count": n}) + "}\n" +
		"  hop: {target: t, relay: {threads: 4, from: " + r.consume(in, nil) + ", to: " + r.produce(out, nil) + "}}\n" +
		"  consumer: {target: t, consume: " + r.consume(out, nil) + "}\n" +
		"progress: 0s\nsteps:\n" +
		"  - start: [consumer, hop]\n" +
		"  - start: producer\n" +
		"  - wait: '!producer.running'\n    timeout: 1m\n" +
		fmt.Sprintf("  - wait: consumer.received >= %d\n    timeout: 1m\n", n) +
		"  - stop: all\n"
	m := mustPass(t, y)
	h, c := m.Workloads["hop"], m.Workloads["consumer"]
	if h.Received != int64(n) || h.Acked != int64(n) || h.Failed != 0 {
		t.Errorf("relay received %d, acked %d, failed %d; want %d, %d, 0", h.Received, h.Acked, h.Failed, n, n)
	}
	if c.Received != int64(n) || c.Lost != 0 || c.Duplicates != 0 {
		t.Errorf("consumer after the relay received %d, lost %d, duplicates %d; want %d, 0, 0", c.Received, c.Lost, c.Duplicates, n)
	}
}

// refused opens a target where nothing listens: the run fails at open,
// promptly, and the error names the address.
func (r *runner) refused(t *testing.T) {
	if r.Refused == nil {
		t.Skip("the suite gives no address where nothing listens")
	}
	addr := r.RefusedAddr
	if addr == "" {
		addr = "127.0.0.1:1"
	}
	y := "name: conformance-refused\n" + r.target(r.Refused) + "workloads:\n" +
		"  producer: {target: t, produce: " + r.produce(topic("refused"), Options{"count": 1}) + "}\n" +
		"progress: 0s\nsteps:\n  - start: producer\n  - wait: '!producer.running'\n    timeout: 30s\n"
	start := time.Now()
	res, out := execute(t, y)
	took := time.Since(start)
	if res.Status == results.Passed {
		t.Fatalf("a run against %s passed:\n%s", addr, out)
	}
	if !strings.Contains(res.Error, addr) {
		t.Errorf("error does not name %s: %s", addr, res.Error)
	}
	if took > time.Minute {
		t.Errorf("the run took %s to fail", took)
	}
	t.Logf("after %s: %s", took.Round(time.Millisecond), res.Error)
}

// credentials reaches a broker that authenticates, with the right and a
// wrong password: the wrong one fails at open without showing it.
func (r *runner) credentials(t *testing.T) {
	r.need(t, "Credentials")
	if r.Credentials == nil {
		t.Skip("the suite has no broker that demands credentials")
	}
	cr := r.Credentials(t)
	tp := topic("credentials")
	body := func(o Options) string {
		y := "name: conformance-credentials\n" + r.target(o) + "workloads:\n" +
			"  producer: {target: t, produce: " + r.produce(tp, Options{"size": 100, "count": 100}) + "}\n"
		if r.caps.Consume {
			y += "  consumer: {target: t, consume: " + r.consume(tp, nil) + "}\n"
		}
		y += "progress: 0s\nsteps:\n"
		if r.caps.Consume {
			y += "  - start: consumer\n"
		}
		y += "  - start: producer\n  - wait: '!producer.running'\n    timeout: 30s\n"
		if r.caps.Consume {
			y += "  - wait: consumer.received >= 100\n    timeout: 30s\n"
		}
		return y + "  - stop: all\n"
	}
	res, out := execute(t, body(cr.Good))
	if res.Status != results.Passed {
		t.Fatalf("with the right credentials the run %s: %s\n%s", res.Status, res.Error, out)
	}
	for _, secret := range secrets(cr.Good) {
		if strings.Contains(out, secret) {
			t.Errorf("the password %q shows in the run's output:\n%s", secret, out)
		}
	}
	m := res.Runs[0].Metrics
	if a := m.Workloads["producer"].Acked; a != 100 {
		t.Errorf("with the right credentials the producer acked %d, want 100", a)
	}
	res, out = execute(t, body(cr.Bad))
	if res.Status == results.Passed {
		t.Fatalf("a run with a wrong password passed:\n%s", out)
	}
	if cr.Secret != "" && (strings.Contains(res.Error, cr.Secret) || strings.Contains(out, cr.Secret)) {
		t.Errorf("the wrong password shows in the error or output: %s\n%s", res.Error, out)
	}
	if !strings.Contains(res.Error, "target "+TargetName) && !strings.Contains(res.Error, `"`+TargetName+`"`) {
		t.Logf("note: error does not name the target: %s", res.Error)
	}
	t.Logf("wrong password: %s", res.Error)
}

// secrets are the values of o's keys that name a password or a secret,
// nested keys included.
func secrets(o Options) []string {
	var out []string
	for k, v := range o {
		switch x := v.(type) {
		case Options:
			out = append(out, secrets(x)...)
		case string:
			if strings.Contains(k, "password") || strings.Contains(k, "secret") {
				out = append(out, x)
			}
		}
	}
	return out
}
