package kafka

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/drivers/drivertest"
	"github.com/planrun/planrun/drivers/tlsconf"
	"github.com/planrun/planrun/units"
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
	cfg.Brokers = Embedded
	tg, err := open(testCtx(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatalf("open embedded: %v", err)
	}
	t.Cleanup(func() { _ = tg.Close() })
	return tg
}

// produce sends the values from threads goroutines and fails the test on
// any error. Every third message has a key.
func produce(t testing.TB, tg *Target, topic string, opts *ProduceOptions, threads int, values [][]byte) {
	t.Helper()
	ctx := testCtx(t, 20*time.Second)
	if opts == nil {
		opts = &ProduceOptions{}
	}
	p, err := tg.NewProducer(ctx, drivers.ProducerSpec{Workload: "w", Topic: topic, Threads: threads}, opts)
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	drivertest.Send(t, ctx, p, topic, threads, values, func(i int, _ []byte) []byte {
		if i%3 != 0 {
			return nil
		}
		return []byte(fmt.Sprintf("key-%d", i%17))
	})
	if err := p.Close(); err != nil {
		t.Fatalf("close producer: %v", err)
	}
}

var (
	makeValues   = drivertest.Values
	newCollector = drivertest.NewCollector
	waitFor      = drivertest.WaitFor
)

type collector = drivertest.Collector

func startConsumer(t testing.TB, tg *Target, spec drivers.ConsumerSpec, col *collector) *drivertest.Running {
	t.Helper()
	return startConsumerFunc(t, tg, spec, col.Handle)
}

func startConsumerFunc(t testing.TB, tg *Target, spec drivers.ConsumerSpec, handle func(*drivers.Message)) *drivertest.Running {
	t.Helper()
	c, err := tg.NewConsumer(testCtx(t, 10*time.Second), spec, &ConsumeOptions{})
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	return drivertest.Consume(c, handle)
}

func lag(t testing.TB, tg *Target, topic, group string) int64 {
	t.Helper()
	n, err := tg.Lag(testCtx(t, 10*time.Second), topic, group)
	if err != nil {
		t.Fatalf("lag: %v", err)
	}
	return n
}

func TestProduceConsumeAll(t *testing.T) {
	tg := openEmbedded(t, nil)
	const n = 5000
	vals, size := makeValues("m", n)
	produce(t, tg, "all", nil, 16, vals)

	if got := lag(t, tg, "all", "g-all"); got != n {
		t.Fatalf("lag of a group that never committed = %d, want %d", got, n)
	}

	col := newCollector()
	r := startConsumer(t, tg, drivers.ConsumerSpec{Workload: "w", Topic: "all", Group: "g-all"}, col)
	waitFor(t, 20*time.Second, "all messages", func() bool { return col.Seen() >= n })
	r.Stop(t)

	if col.Total != n || len(col.Counts) != n {
		t.Fatalf("consumed %d messages (%d distinct), want %d", col.Total, len(col.Counts), n)
	}
	if col.Bytes != size {
		t.Fatalf("consumed %d payload bytes, want %d", col.Bytes, size)
	}
	if len(col.Parts) < 2 {
		t.Errorf("messages landed in %d partitions, want them spread", len(col.Parts))
	}
	waitFor(t, 10*time.Second, "lag 0", func() bool { return lag(t, tg, "all", "g-all") == 0 })
}

func TestStopStartContinuesExactly(t *testing.T) {
	tg := openEmbedded(t, nil)
	first, _ := makeValues("a", 1000)
	produce(t, tg, "cold", nil, 8, first)

	spec := drivers.ConsumerSpec{Workload: "w", Topic: "cold", Group: "g-cold"}
	colA := newCollector()
	// Hold the first consumer back after 300 messages, as a full relay
	// would, so that it stops in the middle of the backlog.
	release := make(chan struct{})
	var handled atomic.Int64
	r := startConsumerFunc(t, tg, spec, func(m *drivers.Message) {
		if handled.Add(1) > 300 {
			<-release
		}
		colA.Handle(m)
	})
	waitFor(t, 20*time.Second, "part of the backlog", func() bool { return colA.Seen() >= 300 })
	// Close without cancelling first: Close itself must stop Run and commit
	// what was handled, including the messages released now.
	close(release)
	if err := r.C.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case err := <-r.Err:
		if err != nil {
			t.Fatalf("run after close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after close")
	}
	r.Cancel()
	consumedA := colA.Seen()
	for id, c := range colA.Counts {
		if c != 1 {
			t.Fatalf("first consumer got %s %d times", id, c)
		}
	}

	second, _ := makeValues("b", 1000)
	produce(t, tg, "cold", nil, 8, second)
	total := len(first) + len(second)
	if got, want := lag(t, tg, "cold", "g-cold"), int64(total-consumedA); got != want {
		t.Fatalf("lag before restart = %d, want %d (produced %d, consumed %d)", got, want, total, consumedA)
	}

	colB := newCollector()
	r = startConsumer(t, tg, spec, colB)
	waitFor(t, 20*time.Second, "the rest", func() bool { return colB.Seen() >= total-consumedA })
	r.Stop(t)

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
	if dups > 10 {
		t.Fatalf("%d messages consumed by both consumers, want at most a few", dups)
	}
	t.Logf("first consumer %d, second %d, duplicates %d", consumedA, colB.Seen(), dups)
	waitFor(t, 10*time.Second, "lag 0", func() bool { return lag(t, tg, "cold", "g-cold") == 0 })
}

func TestCreateTopicPartitions(t *testing.T) {
	tg := openEmbedded(t, nil)
	ctx := testCtx(t, 10*time.Second)
	if err := tg.CreateTopic(ctx, "four", 4); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := tg.CreateTopic(ctx, "four", 4); err != nil {
		t.Fatalf("create again: %v", err)
	}
	vals, _ := makeValues("p", 400)
	produce(t, tg, "four", &ProduceOptions{Partitioner: "round_robin"}, 4, vals)

	col := newCollector()
	r := startConsumer(t, tg, drivers.ConsumerSpec{Workload: "w", Topic: "four", Group: "g-four"}, col)
	waitFor(t, 20*time.Second, "all messages", func() bool { return col.Seen() >= len(vals) })
	r.Stop(t)
	for p := range col.Parts {
		if p < 0 || p > 3 {
			t.Fatalf("message from partition %d of a 4-partition topic", p)
		}
	}
	if len(col.Parts) < 2 {
		t.Fatalf("saw partitions %v, want at least two", col.Parts)
	}
}

func TestFromLatestSkipsBacklog(t *testing.T) {
	tg := openEmbedded(t, nil)
	old, _ := makeValues("old", 100)
	produce(t, tg, "latest", nil, 4, old)

	col := newCollector()
	r := startConsumer(t, tg, drivers.ConsumerSpec{Workload: "w", Topic: "latest", Group: "g-latest", FromLatest: true}, col)
	defer r.Stop(t)
	g := r.C.(drivers.Gauger)
	waitFor(t, 20*time.Second, "partition assignment", func() bool { return g.Gauges()["partitions"] > 0 })
	// The start offset is resolved shortly after assignment; keep producing
	// until something new arrives.
	i := 0
	waitFor(t, 20*time.Second, "a new message", func() bool {
		produce(t, tg, "latest", nil, 1, [][]byte{[]byte(fmt.Sprintf("new%06d:", i))})
		i++
		return col.Seen() > 0
	})
	col.Mu.Lock()
	defer col.Mu.Unlock()
	for id := range col.Counts {
		if strings.HasPrefix(id, "old") {
			t.Fatalf("from-latest consumer got backlog message %s", id)
		}
	}
}

func TestProduceOptions(t *testing.T) {
	tg := openEmbedded(t, nil)
	cases := map[string]*ProduceOptions{
		"acks-none":   {Acks: "none"},
		"acks-leader": {Acks: "leader", Partitioner: "random"},
		"gzip":        {Compression: "gzip", Partitioner: "murmur2"},
		"snappy":      {Compression: "snappy"},
		"lz4":         {Compression: "lz4", BatchSize: units.Size(16 << 10)},
		"zstd":        {Compression: "zstd", BatchSize: units.Size(16 << 10), Linger: ptr(2 * time.Millisecond)},
		"idempotent":  {Idempotent: true},
		"max-msg":     {MaxMessageBytes: units.Size(2 << 20), MaxInFlight: 2},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			if err := opts.Check(); err != nil {
				t.Fatalf("check: %v", err)
			}
			vals, _ := makeValues("o", 200)
			topic := "opt-" + name
			produce(t, tg, topic, opts, 8, vals)
			// acks none is not confirmed: wait for the broker to have it all.
			waitFor(t, 10*time.Second, "all messages stored", func() bool {
				return lag(t, tg, topic, "nobody") == int64(len(vals))
			})
		})
	}
}

func ptr[T any](v T) *T { return &v }

// Evenly paced sends (one every millisecond, each from its own goroutine as
// a producer's threads do) share produce requests under the default linger
// of 5 ms; linger: 0 sends them as they come. The broker counts the
// produce requests it gets.
func TestLingerBatchesPacedSends(t *testing.T) {
	const n = 200
	requests := func(linger *time.Duration) int64 {
		tg := openEmbedded(t, nil)
		topic := "linger"
		if err := tg.CreateTopic(testCtx(t, 10*time.Second), topic, 1); err != nil {
			t.Fatalf("create topic: %v", err)
		}
		var count atomic.Int64
		tg.cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
			tg.cluster.KeepControl()
			count.Add(1)
			return nil, nil, false
		})
		ctx := testCtx(t, 20*time.Second)
		p, err := tg.NewProducer(ctx, drivers.ProducerSpec{Workload: "w", Topic: topic, Threads: n}, &ProduceOptions{Linger: linger})
		if err != nil {
			t.Fatalf("new producer: %v", err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		start := time.Now()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Until(start.Add(time.Duration(i) * time.Millisecond))) // pacing, not synchronisation
				if err := p.Send(ctx, &drivers.Message{Topic: topic, Value: []byte("paced")}); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("send: %v", err)
		}
		if err := p.Close(); err != nil {
			t.Fatalf("close producer: %v", err)
		}
		return count.Load()
	}
	batched, unbatched := requests(nil), requests(ptr(time.Duration(0)))
	t.Logf("%d sends over %d ms: %d produce requests with the default linger, %d with linger: 0", n, n, batched, unbatched)
	// 5 ms windows over 200 ms: about 40 requests; allow for a slow machine.
	if batched > n/2 {
		t.Errorf("default linger: %d produce requests for %d paced sends, want at most %d", batched, n, n/2)
	}
	if unbatched <= batched {
		t.Errorf("linger: 0 made %d produce requests, not more than the default linger's %d", unbatched, batched)
	}
}

func TestSASLEmbedded(t *testing.T) {
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			tg := openEmbedded(t, &TargetConfig{SASL: SASLConfig{Mechanism: mech, User: "bench", Password: "s3cret"}})
			if d := tg.Describe(); !strings.Contains(d, "sasl "+mech) || strings.Contains(d, "s3cret") {
				t.Fatalf("describe = %q", d)
			}
			vals, _ := makeValues("s", 50)
			produce(t, tg, "sasl", nil, 4, vals)
			col := newCollector()
			r := startConsumer(t, tg, drivers.ConsumerSpec{Workload: "w", Topic: "sasl", Group: "g"}, col)
			waitFor(t, 20*time.Second, "all messages", func() bool { return col.Seen() >= len(vals) })
			r.Stop(t)
		})
	}
}

func TestConfigErrors(t *testing.T) {
	d := Driver.(drivers.ConfigChecker)
	err := d.CheckConfig(&ProduceOptions{Idempotent: true, Acks: "leader"})
	if err == nil || !strings.Contains(err.Error(), "idempotent") || !strings.Contains(err.Error(), "acks: all") {
		t.Fatalf("idempotent with acks leader: %v", err)
	}
	if err := d.CheckConfig(&ProduceOptions{Idempotent: true, MaxInFlight: 5}); err == nil || !strings.Contains(err.Error(), "max_in_flight") {
		t.Fatalf("idempotent with max_in_flight 5: %v", err)
	}

	// Options are checked when the plan loads; unchecked ones still fail
	// in the client's own words, without a panic.
	tg := openEmbedded(t, nil)
	_, err = tg.NewProducer(testCtx(t, 5*time.Second), drivers.ProducerSpec{Workload: "w", Topic: "x"}, &ProduceOptions{Idempotent: true, Acks: "none"})
	if err == nil || !strings.Contains(err.Error(), "invalid client settings") {
		t.Fatalf("new producer idempotent with acks none: %v", err)
	}

	for _, bad := range []struct {
		cfg  any
		want string
	}{
		{&TargetConfig{}, "brokers is empty"},
		{&TargetConfig{Brokers: "localhost"}, "no port"},
		{&TargetConfig{Brokers: Embedded, Version: "0.10.2.0"}, "too old"},
		{&TargetConfig{Brokers: Embedded, Version: "banana"}, "version"},
		{&TargetConfig{Brokers: "h:1", SASL: SASLConfig{Mechanism: "GSSAPI", User: "u"}}, "not supported"},
		{&TargetConfig{Brokers: "h:1", SASL: SASLConfig{Mechanism: "PLAIN"}}, "needs sasl.user"},
		{&TargetConfig{Brokers: "h:1", TLS: TLSConfig{Enabled: true, Config: tlsconf.Config{CertFile: "c.pem"}}}, "key_file"},
		{&TargetConfig{Brokers: Embedded, TLS: TLSConfig{Enabled: true}}, "embedded"},
		{&ProduceOptions{Acks: "some"}, "acks"},
		{&ProduceOptions{Compression: "brotli"}, "compression"},
		{&ProduceOptions{Partitioner: "sticky"}, "partitioner"},
		{&ConsumeOptions{Rebalance: "cooperative"}, "rebalance"},
		{&ConsumeOptions{MaxWait: time.Microsecond}, "max_wait"},
	} {
		err := d.CheckConfig(bad.cfg)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("CheckConfig(%+v) = %v, want an error with %q", bad.cfg, err, bad.want)
		}
	}
}

// A refused connection is the conformance suite's; a context deadline also
// bounds Open when the broker never answers.
func TestOpenBoundedByContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Driver.Open(ctx, &TargetConfig{Brokers: "127.0.0.1:1"})
	if err == nil {
		t.Fatal("open succeeded")
	}
}

func TestClosedAndCancelled(t *testing.T) {
	tg := openEmbedded(t, nil)
	p, err := tg.NewProducer(testCtx(t, 5*time.Second), drivers.ProducerSpec{Workload: "w", Topic: "c", Threads: 1}, &ProduceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Send(ctx, &drivers.Message{Value: []byte("x")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("send with cancelled ctx: %v", err)
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

	if _, err := tg.NewConsumer(testCtx(t, 5*time.Second), drivers.ConsumerSpec{Topic: "c"}, &ConsumeOptions{}); err == nil || !strings.Contains(err.Error(), "group") {
		t.Fatalf("consumer without group: %v", err)
	}
	if !strings.Contains(tg.Describe(), "embedded kfake") || !strings.HasPrefix(tg.Describe(), "kafka 127.0.0.1:") {
		t.Fatalf("describe = %q", tg.Describe())
	}
	if err := tg.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Lag(testCtx(t, time.Second), "c", "g"); err == nil {
		t.Fatal("lag after close succeeded")
	}
}

func BenchmarkProduce(b *testing.B) {
	tg := openEmbedded(b, nil)
	const parallelism = 16
	p, err := tg.NewProducer(testCtx(b, 10*time.Second), drivers.ProducerSpec{
		Workload: "bench", Topic: "bench", Threads: parallelism * runtime.GOMAXPROCS(0),
	}, &ProduceOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	value := make([]byte, 1024)
	ctx := context.Background()
	// Create the topic and warm up metadata before timing.
	if err := p.Send(ctx, &drivers.Message{Value: value}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(value)))
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		m := &drivers.Message{Value: value}
		for pb.Next() {
			if err := p.Send(ctx, m); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func TestRunFailsWhenGroupCannotBeJoined(t *testing.T) {
	tg := openEmbedded(t, nil)
	// The broker refuses session timeouts above its maximum (5m).
	c, err := tg.NewConsumer(testCtx(t, 5*time.Second), drivers.ConsumerSpec{
		Workload: "w", Topic: "nojoin", Group: "g-nojoin",
	}, &ConsumeOptions{SessionTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(testCtx(t, 30*time.Second), func(*drivers.Message) {}) }()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "g-nojoin") {
			t.Fatalf("run = %v, want an error naming the group", err)
		}
		t.Logf("error: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("run did not fail")
	}
}

func TestSCRAMClientOutOfOrder(t *testing.T) {
	s := newSCRAM(scram.SHA256)
	if s.Done() {
		t.Fatal("done before begin")
	}
	if _, err := s.Step(""); err == nil {
		t.Fatal("step before begin succeeded")
	}
}

// completions counts how often each message's completion was called.
type completions struct {
	mu    sync.Mutex
	calls map[int]int
	errs  int
}

type completion struct {
	c *completions
	i int
}

func (d completion) Done(err error) {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	d.c.calls[d.i]++
	if err != nil {
		d.c.errs++
	}
}

// SendAsync hands messages over without waiting: every completion is called
// exactly once (by Close at the latest), and every message arrives once.
func TestSendAsyncCompletesEachMessageOnce(t *testing.T) {
	tg := openEmbedded(t, nil)
	const n = 3000
	vals, size := makeValues("a", n)
	ctx := testCtx(t, 20*time.Second)
	p, err := tg.NewProducer(ctx, drivers.ProducerSpec{Workload: "w", Topic: "async", Threads: 64}, &ProduceOptions{})
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	as, ok := p.(drivers.AsyncSender)
	if !ok {
		t.Fatal("the kafka producer is not a drivers.AsyncSender")
	}
	comp := &completions{calls: map[int]int{}}
	var m drivers.Message // reused: the driver must not keep it
	for i, v := range vals {
		m = drivers.Message{Topic: "async", Value: v}
		if i%3 == 0 {
			m.Key = []byte(fmt.Sprintf("key-%d", i%17))
		}
		if err := as.SendAsync(ctx, &m, completion{comp, i}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatalf("close producer: %v", err)
	}
	comp.mu.Lock()
	if len(comp.calls) != n || comp.errs != 0 {
		t.Fatalf("%d of %d messages completed, %d with an error", len(comp.calls), n, comp.errs)
	}
	for i, c := range comp.calls {
		if c != 1 {
			t.Fatalf("message %d completed %d times", i, c)
		}
	}
	comp.mu.Unlock()
	if err := as.SendAsync(ctx, &m, completion{comp, -1}); !errors.Is(err, errProducerClosed) {
		t.Fatalf("send after close: %v, want %v", err, errProducerClosed)
	}

	col := newCollector()
	r := startConsumer(t, tg, drivers.ConsumerSpec{Workload: "w", Topic: "async", Group: "g-async"}, col)
	waitFor(t, 20*time.Second, "all messages", func() bool { return col.Seen() >= n })
	r.Stop(t)
	if col.Total != n || len(col.Counts) != n || col.Bytes != size {
		t.Fatalf("consumed %d messages (%d distinct, %d bytes), want %d (%d bytes)", col.Total, len(col.Counts), col.Bytes, n, size)
	}
}
