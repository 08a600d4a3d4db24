package rocketmq

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func TestMain(m *testing.M) {
	// The client logs rebalances and closed connections at info/warn level.
	rlog.SetLogLevel("fatal")
	os.Exit(m.Run())
}

var instanceSeq atomic.Int64

// uniqueName keeps client instances apart: the client shares one instance
// per IP@name in the whole process.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, instanceSeq.Add(1))
}

func startBroker(t testing.TB, opts Options) *Broker {
	t.Helper()
	if os.Getenv("RMQ_DEBUG") != "" && opts.Logf == nil {
		opts.Logf = t.Logf
	}
	b, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func newProducer(t testing.TB, b *Broker, opts ...producer.Option) sender {
	t.Helper()
	opts = append([]producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{b.NameServerAddr()})),
		producer.WithInstanceName(uniqueName("producer")),
		producer.WithGroupName(uniqueName("pgroup")),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(10 * time.Second),
	}, opts...)
	p, err := producer.NewDefaultProducer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syncIO(t)
		_ = p.Shutdown()
	})
	return p
}

// sender is the part of the client's producer the tests use.
type sender interface {
	SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error)
	Shutdown() error
}

// collector records what a push consumer received.
type collector struct {
	mu       sync.Mutex
	bodies   map[string]int // body -> deliveries
	queues   map[string]int // body -> queue id
	msgs     map[string]*primitive.MessageExt
	inflight atomic.Int64 // callbacks running
}

type consumerHandle interface {
	Shutdown() error
}

func newCollector() *collector {
	return &collector{
		bodies: make(map[string]int),
		queues: make(map[string]int),
		msgs:   make(map[string]*primitive.MessageExt),
	}
}

func (c *collector) add(msgs ...*primitive.MessageExt) {
	c.mu.Lock()
	for _, m := range msgs {
		body := string(m.Body)
		c.bodies[body]++
		c.queues[body] = m.Queue.QueueId
		c.msgs[body] = m
	}
	c.mu.Unlock()
}

func (c *collector) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.bodies)
}

func (c *collector) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.bodies))
	for k, v := range c.bodies {
		out[k] = v
	}
	return out
}

type consumerConfig struct {
	group, instance, topic, selector string
	// handle, when set, decides the result; the collector records only
	// messages for which it returns ConsumeSuccess.
	handle func(context.Context, *primitive.MessageExt) consumer.ConsumeResult
	opts   []consumer.Option
}

func startConsumer(t testing.TB, b *Broker, cfg consumerConfig, col *collector) consumerHandle {
	t.Helper()
	opts := append([]consumer.Option{
		consumer.WithGroupName(cfg.group),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{b.NameServerAddr()})),
		consumer.WithInstance(cfg.instance),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, cfg.opts...)
	c, err := consumer.NewPushConsumer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(cfg.topic, consumer.MessageSelector{Type: consumer.TAG, Expression: cfg.selector},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			col.inflight.Add(1)
			defer col.inflight.Add(-1)
			for _, m := range msgs {
				if cfg.handle != nil {
					if r := cfg.handle(ctx, m); r != consumer.ConsumeSuccess {
						return r, nil
					}
				}
			}
			col.add(msgs...)
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	h := shutdownOnce{c: c, once: &once}
	t.Cleanup(func() {
		syncIO(t)
		_ = h.Shutdown()
	})
	return h
}

// syncIO makes the calling goroutine, for the race detector, happen after
// every socket write any goroutine has made so far (the runtime orders a read
// after all earlier writes). The client library shares unsynchronized state
// between its network goroutines and Shutdown; shutting a client down only
// once it is quiet, and after this point, keeps those client-internal races
// out of -race runs.
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

// waitIdle waits until the group's consumers have a long-poll parked on each
// of its queues (topic queues plus the retry queue) and no consume callback
// is running: nothing is in flight in the client.
func waitIdle(t testing.TB, b *Broker, group string, queues int, cols ...*collector) {
	t.Helper()
	waitFor(t, 30*time.Second, "consumers of "+group+" to go idle", func() bool {
		for _, c := range cols {
			if c.inflight.Load() != 0 {
				return false
			}
		}
		return b.parks.parkedQueues(group) == queues
	})
}

// stopConsumer shuts a quiet consumer down.
func stopConsumer(t testing.TB, c consumerHandle) {
	t.Helper()
	syncIO(t)
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

type shutdownOnce struct {
	c    consumerHandle
	once *sync.Once
}

func (s shutdownOnce) Shutdown() error {
	var err error
	s.once.Do(func() { err = s.c.Shutdown() })
	return err
}

// waitFor polls cond until it holds or the timeout passes. The timeout
// only guards against a hang: a busy machine delays the client (its offset
// commits too) by seconds, so it is never a few seconds.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sendN sends bodies prefix-0..n-1 with the given concurrency; every batch-th
// group of batchSize messages (when batchSize > 1) goes in one SendSync.
func sendN(t testing.TB, p sender, topic, prefix string, n, workers, batchSize int) []string {
	t.Helper()
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	send := func(from, to int) error {
		msgs := make([]*primitive.Message, 0, to-from)
		for i := from; i < to; i++ {
			m := primitive.NewMessage(topic, []byte(bodies[i]))
			m.WithTag("tag" + string(rune('a'+i%2)))
			m.WithKeys([]string{"key-" + bodies[i]})
			m.WithProperty("origin", "test")
			msgs = append(msgs, m)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := p.SendSync(ctx, msgs...)
		if err == nil && res.Status != primitive.SendOK {
			err = fmt.Errorf("send status %v", res.Status)
		}
		return err
	}
	// The client publishes a new route before it records the broker address,
	// so concurrent first sends can fail with "route info not found"; one
	// send first resolves the route.
	if err := send(0, 1); err != nil {
		t.Fatalf("SendSync: %v", err)
	}
	type job struct{ from, to int }
	jobs := make(chan job)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := send(j.from, j.to); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 1; i < n; {
		size := 1
		if batchSize > 1 && (i/batchSize)%4 == 0 {
			size = min(batchSize, n-i)
		}
		jobs <- job{i, i + size}
		i += size
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("SendSync: %v", err)
	}
	return bodies
}

func sumMaxOffset(b *Broker, topic string, queues int) int64 {
	var s int64
	for q := 0; q < queues; q++ {
		s += b.MaxOffset(topic, q)
	}
	return s
}

func sumConsumerOffset(b *Broker, group, topic string, queues int) int64 {
	var s int64
	for q := 0; q < queues; q++ {
		if off := b.ConsumerOffset(group, topic, q); off > 0 {
			s += off
		}
	}
	return s
}

// Test 1 and 5: sync and batch sends, one push consumer gets every message
// once with its properties, and the committed offsets add up after Shutdown.
func TestProduceConsumeAll(t *testing.T) {
	b := startBroker(t, Options{})
	const topic, group, n = "orders", "order-workers", 2000
	if err := b.CreateTopic(topic, 8); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, b)
	bodies := sendN(t, p, topic, "m", n, 8, 10)
	if got := sumMaxOffset(b, topic, 8); got != n {
		t.Fatalf("sum of MaxOffset = %d, want %d", got, n)
	}
	for q := 0; q < 8; q++ {
		if b.MaxOffset(topic, q) == 0 {
			t.Errorf("queue %d received no messages", q)
		}
	}

	col := newCollector()
	c := startConsumer(t, b, consumerConfig{group: group, instance: uniqueName("c"), topic: topic}, col)
	waitFor(t, 30*time.Second, "all messages consumed", func() bool { return col.distinct() == n })

	got := col.snapshot()
	for _, body := range bodies {
		if got[body] == 0 {
			t.Fatalf("message %s never delivered", body)
		}
	}
	if len(got) != n {
		t.Fatalf("received %d distinct bodies, want %d", len(got), n)
	}
	col.mu.Lock()
	m := col.msgs[bodies[7]]
	col.mu.Unlock()
	if m.GetTags() != "tagb" || m.GetKeys() != "key-"+bodies[7] || m.GetProperty("origin") != "test" {
		t.Errorf("properties not preserved: tags=%q keys=%q origin=%q", m.GetTags(), m.GetKeys(), m.GetProperty("origin"))
	}
	if m.Topic != topic || m.StoreHost != b.BrokerAddr() || m.BornTimestamp == 0 || m.StoreTimestamp == 0 {
		t.Errorf("bad message metadata: %s", m)
	}

	// Test 5: Shutdown persists offsets, which then cover every message.
	waitIdle(t, b, group, 8+1, col)
	stopConsumer(t, c)
	waitFor(t, time.Minute, "committed offsets to reach the consumed count", func() bool {
		return sumConsumerOffset(b, group, topic, 8) == int64(len(got))
	})
	if off := b.ConsumerOffset("nobody", topic, 0); off != -1 {
		t.Errorf("ConsumerOffset of unknown group = %d, want -1", off)
	}
}

// Test 2: a new consumer of the same group resumes from the offsets the
// previous one committed: it gets every later message and none of the earlier.
func TestResumeFromCommittedOffsets(t *testing.T) {
	b := startBroker(t, Options{})
	const topic, group = "resume", "resume-group"
	p := newProducer(t, b)
	first := sendN(t, p, topic, "first", 1000, 8, 5)

	colA := newCollector()
	a := startConsumer(t, b, consumerConfig{group: group, instance: uniqueName("a"), topic: topic}, colA)
	waitFor(t, 30*time.Second, "first consumer to get the first batch", func() bool { return colA.distinct() == len(first) })
	waitIdle(t, b, group, 8+1, colA)
	stopConsumer(t, a)
	waitFor(t, time.Minute, "first consumer's offsets to be committed", func() bool {
		return sumConsumerOffset(b, group, topic, 8) == int64(len(first))
	})

	second := sendN(t, p, topic, "second", 500, 8, 5)
	colB := newCollector()
	bc := startConsumer(t, b, consumerConfig{group: group, instance: uniqueName("b"), topic: topic}, colB)
	waitFor(t, 30*time.Second, "second consumer to get the second batch", func() bool { return colB.distinct() == len(second) })
	waitIdle(t, b, group, 8+1, colB)
	stopConsumer(t, bc)

	gotA, gotB := colA.snapshot(), colB.snapshot()
	for _, body := range second {
		if gotB[body] == 0 {
			t.Fatalf("message %s lost", body)
		}
	}
	redelivered := 0
	for body := range gotB {
		if gotA[body] > 0 {
			redelivered++
		}
	}
	if redelivered != 0 || len(gotB) != len(second) {
		t.Fatalf("second consumer got %d messages, %d of them already consumed; want exactly the %d new ones",
			len(gotB), redelivered, len(second))
	}
	waitFor(t, time.Minute, "second consumer's offsets to be committed", func() bool {
		return sumConsumerOffset(b, group, topic, 8) == int64(len(first)+len(second))
	})
}

// Test 3: two consumers of one group split the queues.
func TestConsumerGroupSplitsQueues(t *testing.T) {
	b := startBroker(t, Options{})
	const topic, group = "split", "split-group"
	if err := b.CreateTopic(topic, 8); err != nil {
		t.Fatal(err)
	}
	col1, col2 := newCollector(), newCollector()
	c1 := startConsumer(t, b, consumerConfig{group: group, instance: uniqueName("one"), topic: topic}, col1)
	c2 := startConsumer(t, b, consumerConfig{group: group, instance: uniqueName("two"), topic: topic}, col2)
	waitFor(t, time.Minute, "both consumers registered", func() bool { return len(b.consumers.clientIDs(group)) == 2 })

	p := newProducer(t, b)
	warmup := sendN(t, p, topic, "warm", 400, 8, 0)
	all := func(bodies []string) func() bool {
		return func() bool {
			g1, g2 := col1.snapshot(), col2.snapshot()
			for _, body := range bodies {
				if g1[body] == 0 && g2[body] == 0 {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, 30*time.Second, "warm-up messages consumed", all(warmup))

	// By now the rebalance has settled: each queue belongs to one consumer.
	main := sendN(t, p, topic, "main", 800, 8, 0)
	waitFor(t, 30*time.Second, "all messages consumed", all(main))

	owners := make(map[int]map[*collector]bool)
	for _, col := range []*collector{col1, col2} {
		col.mu.Lock()
		for body, q := range col.queues {
			if strings.HasPrefix(body, "main-") {
				if owners[q] == nil {
					owners[q] = make(map[*collector]bool)
				}
				owners[q][col] = true
			}
		}
		col.mu.Unlock()
	}
	perConsumer := map[*collector]int{}
	for q, o := range owners {
		if len(o) != 1 {
			t.Errorf("queue %d consumed by %d consumers", q, len(o))
		}
		for c := range o {
			perConsumer[c]++
		}
	}
	if len(owners) != 8 || perConsumer[col1] != 4 || perConsumer[col2] != 4 {
		t.Fatalf("queues not split 4/4: %d queues, %d and %d per consumer", len(owners), perConsumer[col1], perConsumer[col2])
	}

	// When one leaves, the broker tells the other, which takes over its queues.
	waitIdle(t, b, group, 8+1, col1, col2)
	stopConsumer(t, c1)
	waitFor(t, time.Minute, "departure noticed", func() bool { return len(b.consumers.clientIDs(group)) == 1 })
	waitIdle(t, b, group, 8+1, col2)
	tail := sendN(t, p, topic, "tail", 80, 4, 0)
	waitFor(t, 30*time.Second, "remaining consumer to get everything", func() bool {
		g := col2.snapshot()
		for _, body := range tail {
			if g[body] == 0 {
				return false
			}
		}
		return true
	})
	waitIdle(t, b, group, 8+1, col2)
	stopConsumer(t, c2)
}

// Test 4: with ACL on, signed requests work and a wrong secret gets a clear
// error naming the access key but not the secret.
func TestACL(t *testing.T) {
	b := startBroker(t, Options{AccessKey: "planrun", SecretKey: "s3cret-value"})
	const topic = "secured"
	good := newProducer(t, b, producer.WithCredentials(primitive.Credentials{AccessKey: "planrun", SecretKey: "s3cret-value"}))
	bodies := sendN(t, good, topic, "acl", 50, 2, 5)

	col := newCollector()
	c := startConsumer(t, b, consumerConfig{
		group: "acl-group", instance: uniqueName("acl"), topic: topic,
		opts: []consumer.Option{consumer.WithCredentials(primitive.Credentials{AccessKey: "planrun", SecretKey: "s3cret-value"})},
	}, col)
	waitFor(t, 30*time.Second, "signed consumer to receive messages", func() bool { return col.distinct() == len(bodies) })
	waitIdle(t, b, "acl-group", 8+1, col)
	stopConsumer(t, c)

	for _, tc := range []struct {
		name string
		cred primitive.Credentials
		want string
	}{
		{"wrong secret", primitive.Credentials{AccessKey: "planrun", SecretKey: "guess"}, `signature mismatch for AccessKey "planrun"`},
		{"unknown key", primitive.Credentials{AccessKey: "intruder", SecretKey: "guess"}, `unknown AccessKey "intruder"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := newProducer(t, b, producer.WithCredentials(tc.cred))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := bad.SendSync(ctx, primitive.NewMessage(topic, []byte("nope")))
			if err == nil {
				t.Fatal("SendSync with bad credentials succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ACL") {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "guess") {
				t.Fatalf("error leaks a secret: %q", err)
			}
		})
	}
	unsigned := newProducer(t, b)
	if _, err := unsigned.SendSync(context.Background(), primitive.NewMessage(topic, []byte("nope"))); err == nil ||
		!strings.Contains(err.Error(), "no AccessKey/Signature") {
		t.Fatalf("unsigned send: err = %v", err)
	}
	if got := sumMaxOffset(b, topic, 8); got != int64(len(bodies)) {
		t.Fatalf("MaxOffset sum = %d, want %d (rejected sends must not be stored)", got, len(bodies))
	}
}

// A tag subscription only receives matching messages.
func TestTagFilter(t *testing.T) {
	b := startBroker(t, Options{DefaultQueues: 4})
	const topic = "tagged"
	p := newProducer(t, b)
	bodies := sendN(t, p, topic, "t", 200, 4, 0) // even index -> taga, odd -> tagb
	col := newCollector()
	c := startConsumer(t, b, consumerConfig{group: "tag-group", instance: uniqueName("tag"), topic: topic, selector: "tagb || tagz"}, col)
	waitFor(t, 20*time.Second, "tagged messages", func() bool { return col.distinct() == 100 })
	waitIdle(t, b, "tag-group", 4+1, col)
	stopConsumer(t, c)
	got := col.snapshot()
	for i, body := range bodies {
		if (i%2 == 1) != (got[body] > 0) {
			t.Fatalf("message %s (tag %c) delivered=%v", body, 'a'+i%2, got[body] > 0)
		}
	}
}

// A failed message comes back through the group's retry topic, and delayed
// messages wait for their level.
func TestRetryAndDelay(t *testing.T) {
	b := startBroker(t, Options{DefaultQueues: 2})
	const topic = "flaky"
	p := newProducer(t, b)
	var failedOnce sync.Map
	col := newCollector()
	c := startConsumer(t, b, consumerConfig{
		group: "flaky-group", instance: uniqueName("flaky"), topic: topic,
		handle: func(ctx context.Context, m *primitive.MessageExt) consumer.ConsumeResult {
			if string(m.Body) == "fail-once" {
				if _, loaded := failedOnce.LoadOrStore("x", true); !loaded {
					cc, _ := primitive.GetConcurrentlyCtx(ctx)
					cc.DelayLevelWhenNextConsume = 1 // 1s
					return consumer.ConsumeRetryLater
				}
			}
			return consumer.ConsumeSuccess
		},
	}, col)

	start := time.Now()
	if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("fail-once"))); err != nil {
		t.Fatal(err)
	}
	delayed := primitive.NewMessage(topic, []byte("delayed")).WithDelayTimeLevel(1)
	if _, err := p.SendSync(context.Background(), delayed); err != nil {
		t.Fatal(err)
	}
	if got := sumMaxOffset(b, topic, 2); got != 1 {
		t.Fatalf("delayed message visible immediately: MaxOffset sum = %d", got)
	}
	waitFor(t, 20*time.Second, "retried and delayed messages", func() bool { return col.distinct() == 2 })
	if el := time.Since(start); el < time.Second {
		t.Fatalf("delivered after %v, before the 1s delay level", el)
	}
	waitIdle(t, b, "flaky-group", 2+1, col)
	stopConsumer(t, c)
	col.mu.Lock()
	retried := col.msgs["fail-once"]
	col.mu.Unlock()
	if retried.ReconsumeTimes != 1 || retried.Topic != topic || retried.GetProperty("RETRY_TOPIC") != topic {
		t.Fatalf("retried message: %s", retried)
	}
}

// Committed data, topics and offsets survive a restart on the same Dir.
func TestRestartRecoversDir(t *testing.T) {
	dir := t.TempDir()
	b1, err := Start(context.Background(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := b1.CreateTopic("durable", 3); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, b1)
	sendN(t, p, "durable", "d", 90, 3, 0)
	b1.store.commitOffset(offsetKey{"g", "durable", 1}, 7)
	syncIO(t)
	_ = p.Shutdown()
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	// A torn record at the tail (crash mid-write) is cut off.
	f, err := os.OpenFile(dir+"/"+commitLogFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte{0, 0, 1, 0, 0xDA, 0xA3})
	_ = f.Close()

	b2 := startBroker(t, Options{Dir: dir})
	if got := sumMaxOffset(b2, "durable", 3); got != 90 {
		t.Fatalf("recovered %d messages, want 90", got)
	}
	if got := b2.ConsumerOffset("g", "durable", 1); got != 7 {
		t.Fatalf("recovered offset %d, want 7", got)
	}
	if n := b2.store.topic("durable").queueCount(); n != 3 {
		t.Fatalf("recovered %d queues, want 3", n)
	}
	col := newCollector()
	c := startConsumer(t, b2, consumerConfig{group: "after-restart", instance: uniqueName("r"), topic: "durable"}, col)
	waitFor(t, 20*time.Second, "recovered messages consumed", func() bool { return col.distinct() == 90 })
	p2 := newProducer(t, b2)
	sendN(t, p2, "durable", "e", 9, 1, 0)
	waitFor(t, 20*time.Second, "new messages consumed", func() bool { return col.distinct() == 99 })
	waitIdle(t, b2, "after-restart", 3+1, col)
	stopConsumer(t, c)
}

// Transactional messages are hidden until committed; rolled back ones never appear.
func TestTransactionCommitAndRollback(t *testing.T) {
	b := startBroker(t, Options{DefaultQueues: 2})
	const topic = "tx"
	tp, err := producer.NewTransactionProducer(txListener{},
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{b.NameServerAddr()})),
		producer.WithInstanceName(uniqueName("tx")),
		producer.WithGroupName(uniqueName("txgroup")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syncIO(t)
		_ = tp.Shutdown()
	})
	for _, body := range []string{"commit-1", "rollback-1", "commit-2"} {
		if _, err := tp.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte(body))); err != nil {
			t.Fatal(err)
		}
	}
	col := newCollector()
	c := startConsumer(t, b, consumerConfig{group: "tx-group", instance: uniqueName("txc"), topic: topic}, col)
	waitFor(t, 20*time.Second, "committed messages", func() bool { return col.distinct() == 2 })
	waitFor(t, 5*time.Second, "all commits stored", func() bool { return sumMaxOffset(b, topic, 2) == 2 })
	waitIdle(t, b, "tx-group", 2+1, col)
	stopConsumer(t, c)
	if got := col.snapshot(); got["rollback-1"] != 0 {
		t.Fatal("rolled back message was delivered")
	}
}

type txListener struct{}

func (txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	if strings.HasPrefix(string(m.Body), "rollback") {
		return primitive.RollbackMessageState
	}
	return primitive.CommitMessageState
}

func (txListener) CheckLocalTransaction(*primitive.MessageExt) primitive.LocalTransactionState {
	return primitive.CommitMessageState
}
