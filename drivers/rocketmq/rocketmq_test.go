package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/drivers/drivertest"
)

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func openEmbedded(t testing.TB, cfg *TargetConfig) *Target {
	t.Helper()
	if cfg == nil {
		cfg = &TargetConfig{}
	}
	cfg.NameServers = Embedded
	tg, err := open(testCtx(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatalf("open embedded: %v", err)
	}
	t.Cleanup(func() { _ = tg.Close() })
	return tg
}

// produce sends the values from threads goroutines through one driver
// producer, as a workload does, and fails the test on any error. Every third
// message has a key.
func produce(t testing.TB, tg *Target, topic string, opts *ProduceOptions, threads int, values [][]byte) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	if opts == nil {
		opts = &ProduceOptions{}
	}
	p, err := tg.NewProducer(ctx, drivers.ProducerSpec{Workload: "w", Topic: topic, Threads: threads}, opts)
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	drivertest.Send(t, ctx, p, topic, threads, values, func(i int, v []byte) []byte {
		if i%3 != 0 {
			return nil
		}
		return []byte(keyOf(v))
	})
	if err := p.Close(); err != nil {
		t.Fatalf("close producer: %v", err)
	}
}

// makeValues returns n distinct values "<prefix><index>:" padded to varying sizes.
func makeValues(prefix string, n int) [][]byte {
	vals, _ := drivertest.Values(prefix, n)
	return vals
}

func keyOf(v []byte) string { return "key-" + drivertest.IDOf(v) }

// collector records what a consumer handled and checks that every message
// carries its receive time, its offset and, if any, its own key.
type collector struct{ *drivertest.Collector }

func newCollector() *collector { return &collector{drivertest.NewCollector()} }

func (c *collector) handle(m *drivers.Message) {
	id := drivertest.IDOf(m.Value)
	if m.Key != nil && string(m.Key) != "key-"+id {
		panic(fmt.Sprintf("message %s arrived with key %q", id, m.Key))
	}
	if m.Received.IsZero() || m.Offset < 0 {
		panic(fmt.Sprintf("message %s without receive time or offset", id))
	}
	c.Handle(m)
}

func (c *collector) seen() int     { return c.Seen() }
func (c *collector) distinct() int { return c.Distinct() }

// running is a consumer whose Run goes on in the background.
type running struct {
	c      drivers.Consumer
	cancel context.CancelFunc
	err    chan error
}

var instanceN atomic.Int64

func startConsumer(t testing.TB, tg *Target, spec drivers.ConsumerSpec, handle func(*drivers.Message)) *running {
	t.Helper()
	return startConsumerWith(t, tg, spec, &ConsumeOptions{}, handle)
}

func startConsumerWith(t testing.TB, tg *Target, spec drivers.ConsumerSpec, opts *ConsumeOptions, handle func(*drivers.Message)) *running {
	t.Helper()
	if spec.Workload == "" {
		spec.Workload = "w"
	}
	if spec.Instance == "" {
		spec.Instance = fmt.Sprintf("test-%d", instanceN.Add(1))
	}
	c, err := tg.NewConsumer(testCtx(t, 10*time.Second), spec, opts)
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, cancel: cancel, err: make(chan error, 1)}
	go func() { r.err <- c.Run(ctx, handle) }()
	t.Cleanup(func() { cancel(); _ = c.Close() })
	return r
}

// stop cancels Run, checks it returned nil and closes the consumer. Tests
// stop consumers once they are quiet (they received what they waited for).
func (r *running) stop(t testing.TB) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.err:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	settle(t, r)
	syncIO(t)
	if err := r.c.Close(); err != nil {
		t.Errorf("close consumer: %v", err)
	}
}

// settle waits until the consumer's group has not rebalanced for a while:
// the client shuts down racily while a rebalance is under way (it reads its
// closed flag, unsynchronised, before every request of the rebalance).
func settle(t testing.TB, r *running) {
	t.Helper()
	const quiet = 300 * time.Millisecond
	last, since := r.gauge("rebalances"), time.Now()
	waitFor(t, 20*time.Second, "the group to stop rebalancing", func() bool {
		if n := r.gauge("rebalances"); n != last {
			last, since = n, time.Now()
		}
		return last > 0 && time.Since(since) >= quiet
	})
}

// syncIO makes the calling goroutine, for the race detector, happen after
// every socket write any goroutine has made so far: with -race, the runtime
// orders each read after all earlier writes. The client library writes its
// closed flag in Shutdown without synchronisation while its network
// goroutines read it before each request; shutting a quiet client down after
// this point keeps that client-internal race out of -race runs.
func syncIO(t testing.TB) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var buf [1]byte
	if _, err := w.Write(buf[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(buf[:]); err != nil {
		t.Fatal(err)
	}
}

func (r *running) gauge(name string) float64 {
	return r.c.(drivers.Gauger).Gauges()[name]
}

var waitFor = drivertest.WaitFor

func lag(t testing.TB, tg *Target, topic, group string) int64 {
	t.Helper()
	n, err := tg.Lag(testCtx(t, 10*time.Second), topic, group)
	if err != nil {
		t.Fatalf("lag: %v", err)
	}
	return n
}

func TestProduceConsumeCounts(t *testing.T) {
	tg := openEmbedded(t, nil)
	const n = 4000
	vals := makeValues("m", n)
	produce(t, tg, "counts", nil, 16, vals)

	if got := lag(t, tg, "counts", "g-counts"); got != n {
		t.Fatalf("lag of a group that never consumed = %d, want %d", got, n)
	}
	col := newCollector()
	r := startConsumer(t, tg, drivers.ConsumerSpec{Topic: "counts", Group: "g-counts"}, col.handle)
	waitFor(t, 30*time.Second, "all messages", func() bool { return col.seen() >= n })
	r.stop(t)

	if col.Total != n || len(col.Counts) != n {
		t.Fatalf("consumed %d messages (%d distinct), want %d", col.Total, len(col.Counts), n)
	}
	if want := (n + 2) / 3; col.Keyed != want {
		t.Errorf("%d messages carried their key, want %d", col.Keyed, want)
	}
	if len(col.Parts) != 8 {
		t.Errorf("messages came from queues %v, want all 8 of the default", col.Parts)
	}
	if got := lag(t, tg, "counts", "g-counts"); got != 0 {
		t.Fatalf("lag after the consumer drained and closed = %d, want 0", got)
	}
	more := makeValues("x", 123)
	produce(t, tg, "counts", nil, 4, more)
	if got := lag(t, tg, "counts", "g-counts"); got != int64(len(more)) {
		t.Fatalf("lag after producing %d more = %d", len(more), got)
	}
}

// TestStopStartContinues is the cold read: a consumer stopped in the middle
// of a backlog commits its position, and the next consumer of the group
// continues from it, losing nothing.
func TestStopStartContinues(t *testing.T) {
	tg := openEmbedded(t, nil)
	first := makeValues("a", 2000)
	produce(t, tg, "cold", nil, 8, first)

	spec := drivers.ConsumerSpec{Topic: "cold", Group: "g-cold"}
	colA := newCollector()
	// Hold the first consumer back after 300 messages, as a full relay
	// would, so that it stops in the middle of the backlog.
	release := make(chan struct{})
	var handled atomic.Int64
	r := startConsumer(t, tg, spec, func(m *drivers.Message) {
		if handled.Add(1) > 300 {
			<-release
		}
		colA.handle(m)
	})
	waitFor(t, 20*time.Second, "part of the backlog", func() bool { return colA.seen() >= 300 })
	// Close without cancelling first: Close itself must end Run, let the
	// held handlers finish and commit.
	settle(t, r)
	syncIO(t)
	closed := make(chan error, 1)
	go func() { closed <- r.c.Close() }()
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case err := <-r.err:
		if err != nil {
			t.Fatalf("run after close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after close")
	}
	for id, c := range colA.Counts {
		if c != 1 {
			t.Fatalf("first consumer got %s %d times", id, c)
		}
	}
	consumedA := colA.distinct()
	lagA := lag(t, tg, "cold", "g-cold")
	if lagA < int64(len(first)-consumedA) || lagA > int64(len(first)) {
		t.Fatalf("lag after close = %d; produced %d, consumed %d", lagA, len(first), consumedA)
	}

	second := makeValues("b", 1000)
	produce(t, tg, "cold", nil, 8, second)
	total := len(first) + len(second)
	if got := lag(t, tg, "cold", "g-cold"); got != lagA+int64(len(second)) {
		t.Fatalf("lag after producing %d more = %d, want %d", len(second), got, lagA+int64(len(second)))
	}

	colB := newCollector()
	r = startConsumer(t, tg, spec, colB.handle)
	waitFor(t, 30*time.Second, "the rest", func() bool { return colB.seen() >= int(lagA)+len(second) })
	r.stop(t)

	dups := 0
	for id := range colB.Counts {
		if colA.Counts[id] > 0 {
			dups++
		}
	}
	union := len(colA.Counts) + len(colB.Counts) - dups
	if union != total {
		t.Fatalf("union of both consumers = %d distinct messages, want %d", union, total)
	}
	// The broker's lag is exactly what the group had not committed: the
	// second consumer received that and nothing else.
	if colB.Total != int(lagA)+len(second) {
		t.Fatalf("second consumer got %d messages, want the lag %d + %d new", colB.Total, lagA, len(second))
	}
	if int(lagA) != len(first)-consumedA+dups {
		t.Fatalf("lag after close %d != produced %d - consumed %d + redelivered %d", lagA, len(first), consumedA, dups)
	}
	// Redelivered: handled by the first consumer but behind an earlier
	// message it had not handled when it stopped.
	if dups > 100 {
		t.Fatalf("%d messages consumed by both consumers, want few", dups)
	}
	t.Logf("first consumer %d, lag after close %d, second consumer %d, redelivered %d", consumedA, lagA, colB.Total, dups)
}

func TestTwoConsumersSplitQueues(t *testing.T) {
	tg := openEmbedded(t, nil)
	if err := tg.CreateTopic(testCtx(t, 10*time.Second), "split", 8); err != nil {
		t.Fatal(err)
	}
	spec := drivers.ConsumerSpec{Topic: "split", Group: "g-split"}
	col1, col2 := newCollector(), newCollector()
	spec.Instance = "one"
	r1 := startConsumer(t, tg, spec, col1.handle)
	spec.Instance = "two"
	r2 := startConsumer(t, tg, spec, col2.handle)
	waitFor(t, 20*time.Second, "the queues to be split 4 and 4", func() bool {
		return r1.gauge("queues") == 4 && r2.gauge("queues") == 4
	})

	const n = 2000
	produce(t, tg, "split", nil, 16, makeValues("s", n))
	waitFor(t, 30*time.Second, "all messages", func() bool { return col1.distinct()+col2.distinct() >= n })
	r1.stop(t)
	r2.stop(t)

	if col1.Total == 0 || col2.Total == 0 {
		t.Fatalf("consumers got %d and %d messages; both should have a share", col1.Total, col2.Total)
	}
	for id := range col1.Counts {
		if col2.Counts[id] > 0 {
			t.Fatalf("message %s went to both consumers of the group", id)
		}
	}
	if col1.Total+col2.Total != n {
		t.Fatalf("consumers got %d + %d messages, want %d", col1.Total, col2.Total, n)
	}
	for q := range col1.Parts {
		if col2.Parts[q] > 0 {
			t.Fatalf("queue %d was read by both consumers", q)
		}
	}
}

func TestCreateTopicQueues(t *testing.T) {
	tg := openEmbedded(t, nil)
	ctx := testCtx(t, 10*time.Second)
	if err := tg.CreateTopic(ctx, "sixteen", 16); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := tg.CreateTopic(ctx, "sixteen", 16); err != nil {
		t.Fatalf("create again: %v", err)
	}
	rd, err := tg.rem.route(ctx, "sixteen")
	if err != nil || len(rd.QueueDatas) != 1 || rd.QueueDatas[0].WriteQueueNums != 16 {
		t.Fatalf("route after create: %+v, %v", rd, err)
	}
	vals := makeValues("q", 800)
	produce(t, tg, "sixteen", nil, 8, vals)
	col := newCollector()
	r := startConsumer(t, tg, drivers.ConsumerSpec{Topic: "sixteen", Group: "g-sixteen"}, col.handle)
	waitFor(t, 20*time.Second, "all messages", func() bool { return col.seen() >= len(vals) })
	waitFor(t, 10*time.Second, "the queue gauge", func() bool { return r.gauge("queues") == 16 })
	r.stop(t)
	for q := range col.Parts {
		if q < 0 || q > 15 {
			t.Fatalf("message from queue %d of a 16-queue topic", q)
		}
	}
	if len(col.Parts) < 8 {
		t.Fatalf("saw queues %v, want messages spread over most of the 16", col.Parts)
	}
}

func TestProduceModes(t *testing.T) {
	tg := openEmbedded(t, nil)
	cases := map[string]*ProduceOptions{
		"async":       {Mode: "async"},
		"oneway":      {Mode: "oneway"},
		"batch":       {Batch: 8},
		"async-batch": {Mode: "async", Batch: 32},
		"tags":        {Tags: "TagA", CompressOver: 64},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			if err := opts.Check(); err != nil {
				t.Fatalf("check: %v", err)
			}
			topic := "mode-" + name
			vals := makeValues("o", 500)
			produce(t, tg, topic, opts, 16, vals)
			// A oneway send is done when written: wait for the broker.
			waitFor(t, 10*time.Second, "all messages stored", func() bool {
				return lag(t, tg, topic, "nobody") == int64(len(vals))
			})
			col := newCollector()
			spec := drivers.ConsumerSpec{Topic: topic, Group: "g"}
			copts := &ConsumeOptions{}
			if opts.Tags != "" {
				copts = &ConsumeOptions{Tags: opts.Tags + " || TagB", MaxBatch: 16, PullBatchSize: 64, ConsumeGoroutines: 4}
			}
			r := startConsumerWith(t, tg, spec, copts, col.handle)
			waitFor(t, 20*time.Second, "all messages", func() bool { return col.seen() >= len(vals) })
			r.stop(t)
			if col.distinct() != len(vals) {
				t.Fatalf("consumed %d distinct messages, want %d", col.distinct(), len(vals))
			}
		})
	}
}

func TestTagFilter(t *testing.T) {
	tg := openEmbedded(t, nil)
	produce(t, tg, "tagged", &ProduceOptions{Tags: "red"}, 4, makeValues("r", 100))
	produce(t, tg, "tagged", &ProduceOptions{Tags: "blue"}, 4, makeValues("b", 50))
	col := newCollector()
	r := startConsumerWith(t, tg, drivers.ConsumerSpec{Topic: "tagged", Group: "g-blue"}, &ConsumeOptions{Tags: "blue"}, col.handle)
	waitFor(t, 20*time.Second, "the blue messages", func() bool { return col.seen() >= 50 })
	r.stop(t)
	for id := range col.Counts {
		if !strings.HasPrefix(id, "b") {
			t.Fatalf("tag filter blue let %s through", id)
		}
	}
}

func TestFromLatestSkipsBacklog(t *testing.T) {
	tg := openEmbedded(t, nil)
	produce(t, tg, "latest", nil, 4, makeValues("old", 100))
	col := newCollector()
	r := startConsumer(t, tg, drivers.ConsumerSpec{Topic: "latest", Group: "g-latest", FromLatest: true}, col.handle)
	defer r.stop(t)
	waitFor(t, 20*time.Second, "queue assignment", func() bool { return r.gauge("queues") > 0 })
	// The start offsets are looked up shortly after assignment; keep
	// producing until something new arrives.
	i := 0
	waitFor(t, 20*time.Second, "a new message", func() bool {
		produce(t, tg, "latest", nil, 1, [][]byte{[]byte(fmt.Sprintf("new%06d:", i))})
		i++
		return col.seen() > 0
	})
	col.Mu.Lock()
	defer col.Mu.Unlock()
	for id := range col.Counts {
		if strings.HasPrefix(id, "old") {
			t.Fatalf("from-latest consumer got backlog message %s", id)
		}
	}
}

func TestACL(t *testing.T) {
	const ak, sk, wrong = "bench", "right-secret-1", "wrong-secret-xyz"
	tg := openEmbedded(t, &TargetConfig{AccessKey: ak, SecretKey: sk})
	if d := tg.Describe(); !strings.Contains(d, "acl") || strings.Contains(d, sk) {
		t.Fatalf("describe = %q", d)
	}
	// Signed topic creation, sends, pulls, commits and lag queries.
	if err := tg.CreateTopic(testCtx(t, 10*time.Second), "secured", 4); err != nil {
		t.Fatalf("create with ACL: %v", err)
	}
	vals := makeValues("k", 300)
	produce(t, tg, "secured", nil, 8, vals)
	col := newCollector()
	r := startConsumer(t, tg, drivers.ConsumerSpec{Topic: "secured", Group: "g-secured"}, col.handle)
	waitFor(t, 20*time.Second, "all messages", func() bool { return col.seen() >= len(vals) })
	r.stop(t)
	if got := lag(t, tg, "secured", "g-secured"); got != 0 {
		t.Fatalf("lag with ACL = %d, want 0", got)
	}

	// A target with the wrong secret is refused when it opens.
	cfg := &TargetConfig{NameServers: tg.nameServers[0], AccessKey: ak, SecretKey: wrong}
	bad, err := Driver.Open(testCtx(t, 10*time.Second), cfg)
	if err == nil {
		_ = bad.Close()
		t.Fatal("open with a wrong secret key succeeded")
	}
	if msg := err.Error(); strings.Contains(msg, wrong) || !strings.Contains(msg, "signature") || !strings.Contains(msg, "check access_key and secret_key") {
		t.Fatalf("open error = %v", err)
	}
	t.Logf("open: %v", err)

	// Sends signed with a wrong secret are refused by the broker.
	wrongTarget := &Target{cfg: tg.cfg, nameServers: tg.nameServers, rem: tg.rem}
	wrongTarget.cfg.SecretKey = wrong
	p, err := wrongTarget.NewProducer(testCtx(t, 5*time.Second), drivers.ProducerSpec{Workload: "w", Topic: "secured", Threads: 1}, &ProduceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	err = p.Send(testCtx(t, 20*time.Second), &drivers.Message{Value: []byte("x")})
	if err == nil {
		t.Fatal("send with a wrong secret key succeeded")
	}
	if msg := err.Error(); strings.Contains(msg, wrong) || !strings.Contains(msg, "signature") || !strings.Contains(msg, "workload w") {
		t.Fatalf("send error = %v", err)
	}
	t.Logf("send: %v", err)
}

func TestConfigErrors(t *testing.T) {
	d := Driver.(drivers.ConfigChecker)
	neg := -1
	for _, bad := range []struct {
		cfg  any
		want string
	}{
		{&TargetConfig{}, "nameservers is empty"},
		{&TargetConfig{NameServers: "localhost"}, "host:port"},
		{&TargetConfig{NameServers: "h:9876", AccessKey: "a"}, "go together"},
		{&TargetConfig{NameServers: "h:9876", DefaultQueues: 4}, "embedded"},
		{&TargetConfig{NameServers: Embedded, Retries: &neg}, "retries"},
		{&TargetConfig{NameServers: Embedded, InstancePrefix: "a b"}, "instance_prefix"},
		{&TargetConfig{NameServers: Embedded, SendTimeout: time.Microsecond}, "send_timeout"},
		{&ProduceOptions{Mode: "fire"}, "mode"},
		{&ProduceOptions{Batch: 5000}, "batch"},
		{&ProduceOptions{Tags: "a||b"}, "tags"},
		{&ConsumeOptions{MaxBatch: 2000}, "max_batch"},
		{&ConsumeOptions{PullBatchSize: -1}, "pull_batch_size"},
		{&ConsumeOptions{PullInterval: time.Hour}, "pull_interval"},
	} {
		err := d.CheckConfig(bad.cfg)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("CheckConfig(%+v) = %v, want an error with %q", bad.cfg, err, bad.want)
		}
	}
	for _, good := range []any{
		&TargetConfig{NameServers: "10.0.0.1:9876;10.0.0.2:9876"},
		&TargetConfig{NameServers: "h1:9876, h2:9876", AccessKey: "a", SecretKey: "s"},
		&ProduceOptions{Mode: "oneway", Batch: 16},
		&ConsumeOptions{MaxBatch: 32, PullBatchSize: 1024, ConsumeGoroutines: 64},
	} {
		if err := d.CheckConfig(good); err != nil {
			t.Errorf("CheckConfig(%+v) = %v", good, err)
		}
	}
	tg := openEmbedded(t, nil)
	if _, err := tg.NewConsumer(testCtx(t, 5*time.Second), drivers.ConsumerSpec{Topic: "c"}, &ConsumeOptions{}); err == nil || !strings.Contains(err.Error(), "group") {
		t.Fatalf("consumer without group: %v", err)
	}
}

func TestClosed(t *testing.T) {
	tg := openEmbedded(t, nil)
	if d := tg.Describe(); !strings.HasPrefix(d, "rocketmq 127.0.0.1:") || !strings.HasSuffix(d, "(embedded)") {
		t.Fatalf("describe = %q", d)
	}
	p, err := tg.NewProducer(testCtx(t, 5*time.Second), drivers.ProducerSpec{Workload: "w", Topic: "c", Threads: 1}, &ProduceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Send(ctx, &drivers.Message{Value: []byte("x")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("send with a cancelled context: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(context.Background(), &drivers.Message{Value: []byte("x")}); err == nil {
		t.Fatal("send after close succeeded")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	produce(t, tg, "c", nil, 1, makeValues("c", 1))
	col := newCollector()
	r := startConsumer(t, tg, drivers.ConsumerSpec{Topic: "c", Group: "g"}, col.handle)
	waitFor(t, 20*time.Second, "the message", func() bool { return col.seen() == 1 })
	r.stop(t)
	if err := r.c.Run(context.Background(), func(*drivers.Message) {}); err == nil {
		t.Fatal("run after close succeeded")
	}
	if err := r.c.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := tg.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Lag(testCtx(t, time.Second), "c", "g"); err == nil {
		t.Fatal("lag after close succeeded")
	}
	if err := tg.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestJavaRouteJSON(t *testing.T) {
	// What a Java name server sends: fastjson writes map keys unquoted.
	body := []byte(`{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"c"}],` +
		`"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}`)
	var rd routeData
	if err := decodeJavaJSON(body, &rd); err != nil {
		t.Fatal(err)
	}
	if got := rd.brokerAddr("broker-a"); got != "10.0.0.1:10911" || rd.QueueDatas[0].ReadQueueNums != 8 {
		t.Fatalf("decoded %+v, master %q", rd, got)
	}
}

// fakePush stands in for the client's push consumer in TestConsumerLifecycle.
type fakePush struct {
	shutdown     atomic.Bool
	shutdownSeen func()
}

func (f *fakePush) Start() error { return nil }
func (f *fakePush) Shutdown() error {
	f.shutdownSeen()
	f.shutdown.Store(true)
	return nil
}
func (f *fakePush) Subscribe(string, consumer.MessageSelector, func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)) error {
	return nil
}
func (f *fakePush) Unsubscribe(string) error           { return nil }
func (f *fakePush) Suspend()                           {}
func (f *fakePush) Resume()                            {}
func (f *fakePush) GetOffsetDiffMap() map[string]int64 { return nil }

// TestConsumerLifecycle checks the hand-over between the client's consume
// calls and Run/Close: deliveries before Run wait for it, Close waits for the
// handler, and deliveries after the stop never reach the workload and are
// not acknowledged.
func TestConsumerLifecycle(t *testing.T) {
	c := newConsumer(drivers.ConsumerSpec{Topic: "t", Group: "g", Workload: "w"})
	var inHandler atomic.Int32
	violations := make(chan string, 4)
	c.pc = &fakePush{shutdownSeen: func() {
		if inHandler.Load() != 0 {
			violations <- "Shutdown while a handler was running"
		}
	}}
	msg := func(off int64) *primitive.MessageExt {
		return &primitive.MessageExt{Message: primitive.Message{Topic: "t", Body: []byte("x"),
			Queue: &primitive.MessageQueue{Topic: "t", QueueId: 3}}, QueueOffset: off}
	}
	results := make(chan consumer.ConsumeResult, 4)
	deliver := func(off int64) {
		go func() {
			r, _ := c.consume(context.Background(), msg(off))
			results <- r
		}()
	}

	deliver(0) // before Run: waits
	handled := make(chan *drivers.Message, 4)
	release := make(chan struct{})
	runErr := make(chan error, 1)
	go func() {
		runErr <- c.Run(context.Background(), func(m *drivers.Message) {
			inHandler.Add(1)
			defer inHandler.Add(-1)
			handled <- m
			if m.Offset == 1 {
				<-release
			}
		})
	}()
	if m := <-handled; m.Offset != 0 || m.Partition != 3 || m.Received.IsZero() {
		t.Fatalf("first delivery handled as %+v", m)
	}
	if r := <-results; r != consumer.ConsumeSuccess {
		t.Fatalf("first delivery result %v", r)
	}

	deliver(1) // its handler blocks until released
	if m := <-handled; m.Offset != 1 {
		t.Fatalf("second delivery handled as %+v", m)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	waitFor(t, 5*time.Second, "Close to stop deliveries", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.stopping
	})
	deliver(2) // after the stop: held until shutdown, never handled
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("run: %v", err)
	}
	got := []consumer.ConsumeResult{<-results, <-results}
	if !(got[0] == consumer.ConsumeSuccess && got[1] == consumer.ConsumeRetryLater) &&
		!(got[1] == consumer.ConsumeSuccess && got[0] == consumer.ConsumeRetryLater) {
		t.Fatalf("results of the held and the late delivery = %v", got)
	}
	select {
	case m := <-handled:
		t.Fatalf("a delivery after the stop reached the workload: %+v", m)
	case v := <-violations:
		t.Fatal(v)
	default:
	}
}
