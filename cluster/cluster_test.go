package cluster

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/planrun/planrun/drivers/memory"
	_ "github.com/planrun/planrun/steps"
)

const testPlan = `name: calls
targets:
  mem: { driver: memory }
workloads:
  producer:
    produce: { topic: t, size: 100B, rate: 1000 }
  burst:
    produce: { topic: t, size: 100B, rate: 1000, count: 50 }
steps:
  - start: producer
`

// syncBuffer is a worker's log, read while the worker writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// await waits until the worker's log has every line given.
func (s *syncBuffer) await(t *testing.T, ctx context.Context, want ...string) {
	t.Helper()
	for {
		missing := ""
		for _, w := range want {
			if !strings.Contains(s.String(), w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the worker never logged %q; its log:\n%s", missing, s.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// joined starts a worker in this process, joins it as a conductor and
// opens a run with the plan's two workloads on it.
func joined(t *testing.T, ctx context.Context, lostAfter time.Duration) (*remote, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	wk := &Worker{Token: "t0k", Version: "test", Out: log, LostAfter: lostAfter}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = wk.Serve(sctx, ln)
	}()
	c := &Conductor{Addrs: []string{ln.Addr().String()}, Token: "t0k", Version: "test", File: "calls.yaml", Source: []byte(testPlan)}
	t.Cleanup(func() {
		c.Close()
		stop()
		<-served
	})
	if err := c.Join(ctx); err != nil {
		t.Fatal(err)
	}
	w := c.workers[0]
	open := &OpenArgs{Run: 0, RunID: 1, Start: time.Now().UnixNano(), Shards: []ShardSpec{
		{Workload: "producer", Of: 1, ID: 1}, {Workload: "burst", Of: 1, ID: 2}}}
	if err := w.call(ctx, "Open", open, &Empty{}); err != nil {
		t.Fatal(err)
	}
	return w, log
}

// A long poll is answered as soon as a shard finishes by itself, not when
// its wait ends; a Wake answers it at once too.
func TestLongPollAnswersOnAChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, _ := joined(t, ctx, 0)
	var f Figures
	if err := w.call(ctx, "Start", &StartArgs{Workloads: []string{"burst"}, At: time.Now().UnixNano()}, &f); err != nil {
		t.Fatal(err)
	}
	// Until the burst has finished (50 messages) every answer it gets comes
	// from a change, the wait being an hour.
	acked := f.Workloads["burst"].Delta.Counters.Acked
	for f.Workloads["burst"].Running {
		f = Figures{}
		if err := w.call(ctx, "Figures", &FiguresArgs{Wait: int64(time.Hour)}, &f); err != nil {
			t.Fatal(err)
		}
		acked += f.Workloads["burst"].Delta.Counters.Acked
	}
	f = Figures{}
	if err := w.call(ctx, "Figures", &FiguresArgs{}, &f); err != nil {
		t.Fatal(err)
	}
	if acked += f.Workloads["burst"].Delta.Counters.Acked; acked != 50 {
		t.Errorf("acked %d, want the burst's 50", acked)
	}
	done := make(chan error, 1)
	go func() { done <- w.call(ctx, "Figures", &FiguresArgs{Wait: int64(time.Hour)}, &Figures{}) }()
	w.wake()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A call the conductor gives up on is cancelled on the worker; a worker
// whose conductor goes silent with shards running stops them and says so,
// and closes the connection.
func TestGivenUpCallIsCancelledAndSilentConductorIsLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, log := joined(t, ctx, 2*time.Second)
	var f Figures
	if err := w.call(ctx, "Start", &StartArgs{Workloads: []string{"producer"}, At: time.Now().UnixNano()}, &f); err != nil {
		t.Fatal(err)
	}
	if !f.Workloads["producer"].Running {
		t.Fatalf("the producer does not run: %+v", f)
	}
	// The start's change is answered at once.
	if err := w.call(ctx, "Figures", &FiguresArgs{}, &Figures{}); err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer ccancel()
	if err := w.call(cctx, "Figures", &FiguresArgs{Wait: int64(time.Hour)}, &Figures{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a long poll of an hour given up on after 100 ms: %v", err)
	}
	log.await(t, ctx, "gave up on call")
	// The worker counts a conductor silent only while none of its calls
	// runs: the hour-long poll must have ended.
	log.await(t, ctx, "lost conductor", "no call for", "stopped its shards of producer")
	if err := w.call(ctx, "Clock", &Empty{}, &ClockReply{}); err == nil {
		t.Error("the worker still answers a conductor it counted lost")
	}
}

// A conductor that leaves with shards running has them stopped, and the
// worker says so.
func TestConductorLeavingStopsShards(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, log := joined(t, ctx, 0)
	if err := w.call(ctx, "Start", &StartArgs{Workloads: []string{"producer"}, At: time.Now().UnixNano()}, &Figures{}); err != nil {
		t.Fatal(err)
	}
	_ = w.client.Close()
	log.await(t, ctx, "left with shards running: stopped its shards of producer")
}
