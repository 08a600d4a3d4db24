package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planrun/planrun/drivers"
)

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustOpen(t *testing.T, cfg *TargetConfig) *Target {
	t.Helper()
	tg, err := open(testCtx(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatalf("open %s: %v", cfg.Addr, err)
	}
	t.Cleanup(func() { _ = tg.Close() })
	return tg
}

// realRedis returns PLANRUN_TEST_REDIS, skipping the test when it is unset,
// except on CI, where a missing server is a failure.
func realRedis(t *testing.T) string {
	t.Helper()
	a := os.Getenv("PLANRUN_TEST_REDIS")
	if a == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("PLANRUN_TEST_REDIS is not set; CI must start redis with eval \"$(bash .ci/services.sh)\"")
		}
		t.Skip("PLANRUN_TEST_REDIS is not set (eval \"$(bash .ci/services.sh)\" starts redis-server)")
	}
	return a
}

func unique(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// sendAll sends n messages from threads goroutines, as a relay's workers do.
func sendAll(t *testing.T, p drivers.Producer, topic string, n, threads int, key func(int) []byte) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
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
				m := &drivers.Message{Topic: topic, Value: []byte(fmt.Sprintf("v%d", i))}
				if key != nil {
					m.Key = key(i)
				}
				if err := p.Send(ctx, m); err != nil {
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

func probeInt(t *testing.T, tg *Target, args ...string) int64 {
	t.Helper()
	v, err := tg.Probe(testCtx(t, 5*time.Second), args)
	if err != nil {
		t.Fatalf("probe %v: %v", args, err)
	}
	n, ok := v.(int64)
	if !ok {
		t.Fatalf("probe %v = %T %v, want int64", args, v, v)
	}
	return n
}

// relayHSet writes n messages as a rule engine would (HSET per message),
// across a restart of the producer, and checks HLEN.
func relayHSet(t *testing.T, tg *Target) {
	topic := unique("planrun:rule")
	const n = 2000
	p, err := tg.NewProducer(testCtx(t, 5*time.Second), drivers.ProducerSpec{Workload: "relay", Topic: topic, Threads: 8}, &ProduceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, p, topic, n/2, 8, nil)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// A restarted producer continues the ids instead of overwriting them.
	p, err = tg.NewProducer(testCtx(t, 5*time.Second), drivers.ProducerSpec{Workload: "relay", Topic: topic, Threads: 8},
		&ProduceOptions{Command: "hset"})
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, p, topic, n/2, 8, nil)
	_ = p.Close()
	if got := probeInt(t, tg, "HLEN", topic); got != n {
		t.Errorf("HLEN %s = %d, want %d", topic, got, n)
	}
	if _, err := tg.Probe(testCtx(t, 5*time.Second), []string{"DEL", topic}); err != nil {
		t.Fatal(err)
	}
}

func TestRelayHSetEmbedded(t *testing.T) {
	relayHSet(t, mustOpen(t, &TargetConfig{Addr: Embedded}))
}

func TestRelayHSetRedis(t *testing.T) {
	relayHSet(t, mustOpen(t, &TargetConfig{Addr: realRedis(t)}))
}

func runCommands(t *testing.T, tg *Target) {
	ctx := testCtx(t, 10*time.Second)
	base := unique("planrun")
	// Keys become the hash fields, so repeated keys count once.
	p, err := tg.NewProducer(ctx, drivers.ProducerSpec{Workload: "w", Topic: base + ":h", Threads: 2}, &ProduceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, p, base+":h", 30, 2, func(i int) []byte { return []byte(fmt.Sprintf("k%d", i%10)) })
	_ = p.Close()
	if got := probeInt(t, tg, "HLEN", base+":h"); got != 10 {
		t.Errorf("HLEN with 10 distinct keys = %d", got)
	}

	for _, c := range []struct {
		cmd, key string
		probe    []string
		want     int64
	}{
		{"xadd", "", []string{"XLEN", base + ":x"}, 25},
		{"lpush", "{topic}-list", []string{"LLEN", base + ":x-list"}, 25},
		{"set", "{workload}:{topic}:{id}", []string{"EXISTS", "w:" + base + ":x:24"}, 1},
	} {
		p, err := tg.NewProducer(ctx, drivers.ProducerSpec{Workload: "w", Topic: base + ":x", Threads: 3},
			&ProduceOptions{Command: c.cmd, Key: c.key})
		if err != nil {
			t.Fatal(err)
		}
		sendAll(t, p, base+":x", 25, 3, nil)
		_ = p.Close()
		if got := probeInt(t, tg, c.probe...); got != c.want {
			t.Errorf("%s: %v = %d, want %d", c.cmd, c.probe, got, c.want)
		}
	}
	if v, err := tg.Probe(ctx, []string{"GET", base + ":missing"}); err != nil || v != nil {
		t.Errorf("GET missing = %v, %v; want nil, nil", v, err)
	}
	// Ids are handed out as senders come, so id 3 holds one of the values.
	if v, err := tg.Probe(ctx, []string{"GET", "w:" + base + ":x:3"}); err != nil || !strings.HasPrefix(fmt.Sprint(v), "v") {
		t.Errorf("GET = %v, %v", v, err)
	}
	if _, err := tg.Probe(ctx, []string{"NOSUCHCOMMAND"}); err == nil {
		t.Error("unknown command did not fail")
	}
	keys, err := tg.Probe(ctx, []string{"KEYS", base + "*"})
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := keys.([]any); !ok || len(l) < 3 {
		t.Errorf("KEYS = %T %v", keys, keys)
	} else {
		args := []string{"DEL"}
		for _, k := range l {
			args = append(args, fmt.Sprint(k))
		}
		_, _ = tg.Probe(ctx, args)
	}
}

func TestCommandsEmbedded(t *testing.T) { runCommands(t, mustOpen(t, &TargetConfig{Addr: Embedded})) }

func TestCommandsRedis(t *testing.T) { runCommands(t, mustOpen(t, &TargetConfig{Addr: realRedis(t)})) }

func TestNoConsumer(t *testing.T) {
	tg := mustOpen(t, &TargetConfig{Addr: Embedded})
	_, err := tg.NewConsumer(context.Background(), drivers.ConsumerSpec{Topic: "x"}, &drivers.NoOptions{})
	if err == nil || !strings.Contains(err.Error(), "only be written to or probed") {
		t.Fatalf("NewConsumer: %v", err)
	}
}

func TestCheckConfig(t *testing.T) {
	d := Driver.(drivers.ConfigChecker)
	for _, b := range []struct {
		cfg  any
		want string
	}{
		{&TargetConfig{}, "addr is empty"},
		{&TargetConfig{Addr: "redis://h:1"}, "without a scheme"},
		{&TargetConfig{Addr: "host"}, "host:port"},
		{&TargetConfig{Addr: "h:1", DB: -1}, "negative"},
		{&ProduceOptions{Command: "sadd"}, "use hset"},
		{&ProduceOptions{Key: "{topc}"}, "unknown placeholder {topc}"},
		{&ProduceOptions{Command: "set", Key: "fixed"}, "overwrites"},
	} {
		if err := d.CheckConfig(b.cfg); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("CheckConfig(%+v) = %v, want %q", b.cfg, err, b.want)
		}
	}
	for _, g := range []any{
		&TargetConfig{Addr: "embedded"},
		&TargetConfig{Addr: "127.0.0.1:6379", DB: 2, Username: "u", Password: "p"},
		&ProduceOptions{Command: "XADD", Key: "s:{workload}"},
	} {
		if err := d.CheckConfig(g); err != nil {
			t.Errorf("CheckConfig(%+v) = %v", g, err)
		}
	}
	if _, ok := drivers.Lookup("redis"); !ok {
		t.Error("redis driver is not registered")
	}
}
