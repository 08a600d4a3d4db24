package mqtt

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/drivers/tlsconf"
)

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustOpen(t testing.TB, cfg *TargetConfig) *Target {
	t.Helper()
	tg, err := open(testCtx(t, 20*time.Second), variant(cfg))
	if err != nil {
		t.Fatalf("open %s: %v", cfg.URL, err)
	}
	t.Cleanup(func() { _ = tg.Close() })
	return tg
}

func openEmbedded(t testing.TB, client string) *Target {
	return mustOpen(t, &TargetConfig{URL: Embedded, Client: client})
}

// clientLean5 is the lean client speaking MQTT 5, as a test variant.
const clientLean5 = "lean-v5"

// clients are the MQTT clients every driver test runs with.
var clients = []string{clientPaho, clientLean, clientLean5}

// variant turns the test-only client name lean-v5 into client: lean with
// protocol_version: 5 (unless the test sets a protocol version itself).
func variant(cfg *TargetConfig) *TargetConfig {
	if cfg.Client != clientLean5 {
		return cfg
	}
	c := *cfg
	c.Client = clientLean
	if c.ProtocolVersion == 0 {
		c.ProtocolVersion = 5
	}
	return &c
}

// needs311 skips the MQTT 5 variant against a broker that speaks only
// MQTT 3.1 and 3.1.1.
func needs311(t *testing.T, cl, broker string) {
	t.Helper()
	if cl == clientLean5 {
		t.Skipf("%s speaks MQTT 3.1 and 3.1.1 only (TestMQTT5RefusedByActiveMQ covers it)", broker)
	}
}

// eachClient runs test once per client, as a subtest named after it.
func eachClient(t *testing.T, test func(t *testing.T, client string)) {
	for _, cl := range clients {
		t.Run(cl, func(t *testing.T) { test(t, cl) })
	}
}

// realBroker returns the URL in env, skipping the test when it is unset,
// except on CI, where a missing broker is a failure.
func realBroker(t *testing.T, env string) string {
	t.Helper()
	u := os.Getenv(env)
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set; CI must start the brokers with eval \"$(bash .ci/services.sh)\"", env)
		}
		t.Skipf("%s is not set (eval \"$(bash .ci/services.sh)\" starts the brokers)", env)
	}
	return u
}

// unique makes topic names that earlier runs against a real broker did not use.
func unique(prefix string) string {
	return fmt.Sprintf("%s-%s", prefix, randomHex(4))
}

func intp(i int) *int    { return &i }
func boolp(b bool) *bool { return &b }

// eventually polls cond every 10ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// collector runs a consumer and records what it receives.
type collector struct {
	mu     sync.Mutex
	values map[string]int
	topics map[string]int
	n      atomic.Int64
	dups   atomic.Int64
	done   chan error
	cancel context.CancelFunc
}

func collect(t *testing.T, c drivers.Consumer) *collector {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	col := &collector{values: map[string]int{}, topics: map[string]int{}, done: make(chan error, 1), cancel: cancel}
	go func() {
		col.done <- c.Run(ctx, func(m *drivers.Message) {
			if m.Received.IsZero() {
				panic("received message without Received time")
			}
			col.mu.Lock()
			col.values[string(m.Value)]++
			if col.values[string(m.Value)] > 1 {
				col.dups.Add(1)
			}
			col.topics[m.Topic]++
			col.mu.Unlock()
			col.n.Add(1)
		})
	}()
	t.Cleanup(func() { col.stop(t); _ = c.Close() })
	return col
}

func (col *collector) stop(t *testing.T) {
	if col.cancel == nil {
		return
	}
	col.cancel()
	col.cancel = nil
	select {
	case err := <-col.done:
		if err != nil {
			t.Errorf("consumer run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("consumer run did not return after cancel")
	}
}

func (col *collector) wait(t *testing.T, n int, d time.Duration) {
	t.Helper()
	eventually(t, d, fmt.Sprintf("%d messages (have %d)", n, col.n.Load()), func() bool { return col.n.Load() >= int64(n) })
}

// send publishes n distinct values prefix-0..n-1 from threads goroutines,
// message i from source i.
func send(t *testing.T, p drivers.Producer, topic, prefix string, n, threads int) {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, threads)
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := p.Send(ctx, &drivers.Message{Topic: topic, Value: []byte(fmt.Sprintf("%s-%d", prefix, i)), Source: i}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("send: %v", err)
	}
}

func newProducer(t *testing.T, tg *Target, topic string, threads int, o *ProduceOptions) drivers.Producer {
	t.Helper()
	if o == nil {
		o = &ProduceOptions{}
	}
	p, err := tg.NewProducer(testCtx(t, 20*time.Second), drivers.ProducerSpec{Workload: "pub", Topic: topic, Threads: threads}, o)
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func newConsumer(t *testing.T, tg *Target, topic, group, instance string, o *ConsumeOptions) drivers.Consumer {
	t.Helper()
	if o == nil {
		o = &ConsumeOptions{}
	}
	c, err := tg.NewConsumer(testCtx(t, 20*time.Second), drivers.ConsumerSpec{Workload: "sub", Topic: topic, Group: group, Instance: instance}, o)
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	return c
}

func checkAll(t *testing.T, col *collector, prefix string, n int) {
	t.Helper()
	col.mu.Lock()
	defer col.mu.Unlock()
	for i := range n {
		if col.values[fmt.Sprintf("%s-%d", prefix, i)] == 0 {
			t.Fatalf("message %s-%d never arrived (%d of %d did)", prefix, i, len(col.values), n)
		}
	}
}

// qos1Counts publishes n QoS 1 messages from several clients and checks a
// subscriber receives every one.
func qos1Counts(t *testing.T, tg *Target, n int) {
	topic := unique("planrun/qos1")
	col := collect(t, newConsumer(t, tg, topic, "g", "c0", &ConsumeOptions{QoS: intp(1)}))
	p := newProducer(t, tg, topic, 8, &ProduceOptions{Clients: 4, QoS: intp(1)})
	send(t, p, topic, "m", n, 8)
	col.wait(t, n, 30*time.Second)
	checkAll(t, col, "m", n)
	if d := col.dups.Load(); d != 0 {
		t.Logf("%d duplicates (QoS 1 allows them)", d)
	}
}

func TestQoS1Embedded(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		tg := openEmbedded(t, cl)
		qos1Counts(t, tg, 5000)
		if d := tg.Broker().Stats().Dropped; d != 0 {
			t.Errorf("embedded broker dropped %d messages", d)
		}
	})
}

// qos0And2 publishes at QoS 0 and QoS 2 and checks a subscriber of the
// same QoS receives every message.
func qos0And2(t *testing.T, tg *Target) {
	for _, q := range []int{0, 2} {
		t.Run(fmt.Sprintf("qos%d", q), func(t *testing.T) {
			topic := unique("planrun/qos")
			// A client id of its own per QoS: the previous subtest's
			// subscriber may still be leaving the broker.
			col := collect(t, newConsumer(t, tg, topic, "g", fmt.Sprintf("c%d", q), &ConsumeOptions{QoS: intp(q)}))
			p := newProducer(t, tg, topic, 4, &ProduceOptions{QoS: intp(q)})
			send(t, p, topic, "m", 500, 4)
			col.wait(t, 500, 20*time.Second)
			checkAll(t, col, "m", 500)
		})
	}
}

func TestQoS0And2(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) { qos0And2(t, openEmbedded(t, cl)) })
}

func TestQoS0And2Mosquitto(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		qos0And2(t, mustOpen(t, &TargetConfig{Client: cl, URL: realBroker(t, "PLANRUN_TEST_MOSQUITTO")}))
	})
}

func TestQoS0And2ActiveMQ(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		needs311(t, cl, "ActiveMQ")
		qos0And2(t, mustOpen(t, &TargetConfig{Client: cl, URL: realBroker(t, "PLANRUN_TEST_ACTIVEMQ")}))
	})
}

func TestConnectRate(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		tg := openEmbedded(t, cl)
		const clients, rate = 2000, 2500.0
		start := time.Now()
		conns, err := tg.Connect(testCtx(t, 20*time.Second), drivers.ConnectSpec{Workload: "fleet"},
			&ProduceOptions{Clients: clients, ConnectRate: rate, KeepAlive: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer conns.Close()
		eventually(t, 40*time.Second, "2000 connected clients", func() bool { return conns.Gauges()["connected"] == clients })
		took := time.Since(start)
		// Client k connects no sooner than k/rate after client 0.
		if least := time.Duration(float64(clients-1) / rate * float64(time.Second)); took < least {
			t.Errorf("%d clients at %g/s connected in %s, faster than the rate allows (%s)", clients, rate, took, least)
		}
		g := conns.Gauges()
		t.Logf("connected %d clients in %s (%.0f/s); gauges %v", clients, took, clients/took.Seconds(), g)
		if g["connect_failures"] != 0 || g["reconnects"] != 0 || g["connect_latency_ms"] <= 0 {
			t.Errorf("gauges %v", g)
		}
		if n := tg.Broker().Stats().ClientsConnected; n < clients {
			t.Errorf("broker sees %d clients", n)
		}
		if err := conns.Close(); err != nil {
			t.Fatal(err)
		}
		if c := conns.Gauges()["connected"]; c != 0 {
			t.Errorf("connected = %g after close", c)
		}
		eventually(t, 10*time.Second, "broker to see the clients go", func() bool { return tg.Broker().Stats().ClientsConnected == 0 })
	})
}

// A fleet split over processes keeps its client indexes dense and its
// connect rate: the shards together connect at the plan's connect_rate.
func TestShardSplitsClientsAndConnectRate(t *testing.T) {
	for _, tc := range []struct {
		clients, threads int
		rate             float64
	}{{10, 0, 1000}, {3, 0, 90}, {0, 7, 700}} {
		o := &ProduceOptions{Clients: tc.clients, ConnectRate: tc.rate}
		var sum float64
		next := 0
		for i := range 3 {
			base, threads := drivers.Split(max(tc.threads, 1), i, 3)
			s := o.Shard(drivers.Part{Index: i, Of: 3, ThreadBase: base, Threads: threads}).(*ProduceOptions)
			if tc.clients > 0 {
				if s.ClientBase != next {
					t.Errorf("%+v shard %d: clients from %d, want %d", tc, i, s.ClientBase, next)
				}
				next += s.Clients
				if want := tc.rate * float64(s.Clients) / float64(tc.clients); s.ConnectRate != want {
					t.Errorf("%+v shard %d: connect_rate %g, want %g", tc, i, s.ConnectRate, want)
				}
			}
			sum += s.ConnectRate
		}
		if tc.clients > 0 && next != tc.clients {
			t.Errorf("%+v: shards hold %d clients", tc, next)
		}
		if sum < tc.rate*0.999999 || sum > tc.rate*1.000001 {
			t.Errorf("%+v: shards connect at %g/s together, want %g", tc, sum, tc.rate)
		}
	}
}

func TestTopicTemplateAndWildcard(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		tg := openEmbedded(t, cl)
		base := unique("devices")
		col := collect(t, newConsumer(t, tg, base+"/+/data", "g", "c", nil))
		all := collect(t, newConsumer(t, tg, base+"/#", "g", "c2", nil))
		topic := base + "/{client}/data"
		p := newProducer(t, tg, topic, 2, &ProduceOptions{Clients: 5, ConnectRate: 1000})
		if s := p.(drivers.Sourcer).Sources(); s != 5 {
			t.Fatalf("Sources() = %d, want 5", s)
		}
		send(t, p, topic, "m", 50, 2)
		col.wait(t, 50, 20*time.Second)
		all.wait(t, 50, 20*time.Second)
		col.mu.Lock()
		defer col.mu.Unlock()
		for i := range 5 {
			if got := col.topics[fmt.Sprintf("%s/%d/data", base, i)]; got != 10 {
				t.Errorf("topic %s/%d/data got %d messages, want 10 (topics %v)", base, i, got, col.topics)
			}
		}
	})
}

func TestSharedSubscription(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		tg := openEmbedded(t, cl)
		topic := unique("planrun/shared")
		a := collect(t, newConsumer(t, tg, topic, "grp", "a", &ConsumeOptions{Shared: true}))
		b := collect(t, newConsumer(t, tg, topic, "grp", "b", &ConsumeOptions{Shared: true}))
		// A literal $share filter passes through unchanged.
		lit := collect(t, newConsumer(t, tg, "$share/other/"+topic, "ignored", "c", nil))
		p := newProducer(t, tg, topic, 4, nil)
		const n = 400
		send(t, p, topic, "m", n, 4)
		eventually(t, 20*time.Second, "shared group to receive all", func() bool { return a.n.Load()+b.n.Load() >= n })
		lit.wait(t, n, 20*time.Second)
		if a.n.Load() == 0 || b.n.Load() == 0 {
			t.Errorf("shared subscription did not spread: a=%d b=%d", a.n.Load(), b.n.Load())
		}
		a.mu.Lock()
		b.mu.Lock()
		for v := range a.values {
			if b.values[v] > 0 {
				t.Errorf("%s went to both members of the group", v)
			}
		}
		b.mu.Unlock()
		a.mu.Unlock()
		if got := a.n.Load() + b.n.Load(); got != n {
			t.Errorf("group received %d, want %d", got, n)
		}
	})
}

// persistentSession checks that a consumer with clean_session false gets,
// after a restart, what was published while it was stopped.
func persistentSession(t *testing.T, tg *Target) {
	topic := unique("planrun/persist")
	id := unique("planrun-persist") + "-{client}"
	o := &ConsumeOptions{QoS: intp(1), CleanSession: boolp(false), ClientID: id, Clients: 2}
	first := newConsumer(t, tg, topic, "g", "x0", o)
	col := collect(t, first)
	p := newProducer(t, tg, topic, 2, nil)
	send(t, p, topic, "before", 20, 2)
	col.wait(t, 40, 20*time.Second) // two clients, each subscribed
	col.stop(t)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	const n = 200
	send(t, p, topic, "away", n, 2)
	second := newConsumer(t, tg, topic, "g", "x1", o)
	col2 := collect(t, second)
	// Each of the two clients has a session of its own, so every message
	// comes twice.
	eventually(t, 30*time.Second, "the messages published while away", func() bool {
		col2.mu.Lock()
		defer col2.mu.Unlock()
		for i := range n {
			if col2.values[fmt.Sprintf("away-%d", i)] < 2 {
				return false
			}
		}
		return true
	})
	// Clean up the broker-side sessions.
	col2.stop(t)
	_ = second.Close()
	cleanup := &ConsumeOptions{CleanSession: boolp(true), ClientID: id, Clients: 2}
	_ = newConsumer(t, tg, topic, "g", "x2", cleanup).Close()
}

func TestPersistentSessionEmbedded(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) { persistentSession(t, openEmbedded(t, cl)) })
}

func TestPersistentSessionMosquitto(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		persistentSession(t, mustOpen(t, &TargetConfig{Client: cl, URL: realBroker(t, "PLANRUN_TEST_MOSQUITTO")}))
	})
}

func TestPersistentSessionActiveMQ(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		needs311(t, cl, "ActiveMQ")
		persistentSession(t, mustOpen(t, &TargetConfig{Client: cl, URL: realBroker(t, "PLANRUN_TEST_ACTIVEMQ")}))
	})
}

// TestBlockingHandler checks that a handler that blocks (a relay pushing
// back) does not stop the client from reading: messages keep arriving and
// queue up, and all are handled once it unblocks.
func TestBlockingHandler(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		tg := openEmbedded(t, cl)
		topic := unique("planrun/block")
		c := newConsumer(t, tg, topic, "g", "c", nil)
		release := make(chan struct{})
		var handled atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- c.Run(ctx, func(*drivers.Message) {
				<-release
				handled.Add(1)
			})
		}()
		p := newProducer(t, tg, topic, 4, nil)
		const n = 300
		send(t, p, topic, "m", n, 4)
		g := c.(drivers.Gauger)
		eventually(t, 20*time.Second, "messages to queue behind the blocked handler", func() bool { return g.Gauges()["queued"] >= n-1 })
		close(release)
		eventually(t, 20*time.Second, "all handled", func() bool { return handled.Load() == n })
		if r := g.Gauges()["reconnects"]; r != 0 {
			t.Errorf("reconnects = %g", r)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	})
}

// TestSendWaitsForConnection: with a slow connect_rate, a send on a client
// that is not connected yet waits for it instead of failing.
func TestSendWaitsForConnection(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		tg := openEmbedded(t, cl)
		topic := unique("planrun/wait")
		col := collect(t, newConsumer(t, tg, topic, "g", "c", nil))
		start := time.Now()
		p := newProducer(t, tg, topic, 1, &ProduceOptions{Clients: 10, ConnectRate: 50})
		if err := p.Send(testCtx(t, 10*time.Second), &drivers.Message{Topic: topic, Value: []byte("last"), Source: 9}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < 9*20*time.Millisecond {
			t.Errorf("send on client 9 returned %s after the producer started; client 9 cannot connect before 180ms", took)
		}
		col.wait(t, 1, 10*time.Second)
		// A send bounded by a short timeout fails cleanly.
		p2 := newProducer(t, tg, topic, 1, &ProduceOptions{Clients: 3, ConnectRate: 0.5, SendTimeout: 50 * time.Millisecond})
		err := p2.Send(testCtx(t, 10*time.Second), &drivers.Message{Topic: topic, Value: []byte("x"), Source: 2})
		if err == nil || !strings.Contains(err.Error(), "not connected") {
			t.Errorf("send on a client that cannot be connected yet: %v", err)
		}
	})
}

func TestConsumerIDClash(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		tg := openEmbedded(t, cl)
		o := &ConsumeOptions{ClientID: "fixed-{client}"}
		c := newConsumer(t, tg, "a/b", "g", "i0", o)
		defer c.Close()
		_, err := tg.NewConsumer(testCtx(t, 5*time.Second), drivers.ConsumerSpec{Workload: "sub", Topic: "a/b", Group: "g", Instance: "i1"}, o)
		if err == nil || !strings.Contains(err.Error(), "already used") {
			t.Fatalf("second consumer with the same client id: %v", err)
		}
	})
}

func TestCheckConfig(t *testing.T) {
	d := Driver.(drivers.ConfigChecker)
	bad := []struct {
		cfg  any
		want string
	}{
		{&TargetConfig{}, "url is empty"},
		{&TargetConfig{URL: "tcp://host"}, "no port"},
		{&TargetConfig{URL: "http://host:1"}, "not supported"},
		{&TargetConfig{URL: "tcp://u:p@host:1"}, "credentials"},
		{&TargetConfig{URL: "tcp://host:1", ProtocolVersion: 5}, "protocol_version 5 needs client: lean"},
		{&TargetConfig{URL: "tcp://host:1", ProtocolVersion: 6}, "use 3"},
		{&TargetConfig{URL: "tcp://host:1", Password: "x"}, "username is empty"},
		{&TargetConfig{URL: "tcp://host:1", TLS: tlsconf.Config{InsecureSkipVerify: true}}, "not ssl"},
		{&TargetConfig{URL: "tcp://host:1", SourceAddrs: []string{"nope"}}, "not an IP"},
		{&ProduceOptions{QoS: intp(3)}, "qos 3"},
		{&ProduceOptions{KeepAlive: 1500 * time.Millisecond}, "whole seconds"},
		{&ProduceOptions{ClientID: "x-{clinet}"}, "unknown placeholder {clinet}"},
		{&ProduceOptions{ClientID: "fixed", Clients: 3}, "has no {client}"},
		{&ConsumeOptions{CleanSession: boolp(false)}, "needs a client_id"},
		{&ConsumeOptions{CleanSession: boolp(false), ClientID: "x-{instance}"}, "{instance} changes"},
	}
	for _, b := range bad {
		err := d.CheckConfig(b.cfg)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("CheckConfig(%+v) = %v, want an error with %q", b.cfg, err, b.want)
		}
	}
	good := []any{
		&TargetConfig{URL: "embedded"},
		&TargetConfig{URL: "ssl://broker:8883", TLS: tlsconf.Config{InsecureSkipVerify: true}, SourceAddrs: []string{"127.0.0.2"}},
		&TargetConfig{URL: "ws://broker:8080/mqtt", ProtocolVersion: 3},
		&ProduceOptions{Clients: 100, ConnectRate: 50, KeepAlive: 30 * time.Second, QoS: intp(0), ClientID: "dev-{workload}-{client}"},
		&ConsumeOptions{CleanSession: boolp(false), ClientID: "sub-{client}", Clients: 2, Shared: true},
	}
	for _, g := range good {
		if err := d.CheckConfig(g); err != nil {
			t.Errorf("CheckConfig(%+v) = %v", g, err)
		}
	}
	if err := checkPublishTopic("a/+/b"); err == nil {
		t.Error("publishing to a wildcard topic was accepted")
	}
}

func TestSourceAddrs(t *testing.T) {
	eachClient(t, func(t *testing.T, cl string) {
		tg := mustOpen(t, &TargetConfig{Client: cl, URL: Embedded, SourceAddrs: []string{"127.0.0.1", "127.0.0.2"}})
		if !strings.Contains(tg.Describe(), "2 source addresses") {
			t.Errorf("Describe() = %q", tg.Describe())
		}
		topic := unique("planrun/src")
		col := collect(t, newConsumer(t, tg, topic, "g", "c", nil))
		p := newProducer(t, tg, topic, 4, &ProduceOptions{Clients: 4, ClientID: "src-{client}"})
		send(t, p, topic, "m", 40, 4)
		col.wait(t, 40, 10*time.Second)
		// Clients alternate between the two source addresses.
		remotes := tg.Broker().RemoteAddrs()
		for i := range 4 {
			want := []string{"127.0.0.1:", "127.0.0.2:"}[i%2]
			if r := remotes[fmt.Sprintf("src-%d", i)]; !strings.HasPrefix(r, want) {
				t.Errorf("client %d connected from %q, want %s*", i, r, want)
			}
		}
	})
}
