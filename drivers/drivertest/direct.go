package drivertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planrun/planrun/drivers"
)

// The helpers below drive a driver's producers and consumers directly, for
// a driver's own protocol-specific tests (partitions, offsets, options):
// what every driver must do is Run's business.

// Values returns n distinct payloads "<prefix><index>:" padded to varying
// sizes, and their total size; IDOf gives a payload's identity back.
func Values(prefix string, n int) ([][]byte, int64) {
	vals := make([][]byte, n)
	var total int64
	for i := range vals {
		v := []byte(fmt.Sprintf("%s%06d:", prefix, i))
		v = append(v, make([]byte, 10+i%200)...)
		vals[i] = v
		total += int64(len(v))
	}
	return vals, total
}

// IDOf returns the identifying prefix of a payload made by Values.
func IDOf(v []byte) string {
	s := string(v)
	if i := strings.IndexByte(s, ':'); i >= 0 {
		return s[:i]
	}
	return s
}

// Send sends values to topic through p from threads goroutines, as a
// workload's threads do, and fails the test on any error. key gives a
// message's key from its index and payload (nil: none); key may be nil.
func Send(t testing.TB, ctx context.Context, p drivers.Producer, topic string, threads int, values [][]byte, key func(i int, v []byte) []byte) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, threads)
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(values) {
					return
				}
				m := &drivers.Message{Topic: topic, Value: values[i]}
				if key != nil {
					m.Key = key(i, values[i])
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

// Collector records what a consumer handled, by payload identity.
type Collector struct {
	Mu     sync.Mutex
	Counts map[string]int // by IDOf
	Bytes  int64
	Total  int
	Parts  map[int32]int // messages per partition (queue)
	Keyed  int           // messages with a key
}

// NewCollector returns an empty collector.
func NewCollector() *Collector {
	return &Collector{Counts: map[string]int{}, Parts: map[int32]int{}}
}

// Handle records m; it is a consumer's handler.
func (c *Collector) Handle(m *drivers.Message) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	c.Counts[IDOf(m.Value)]++
	c.Bytes += int64(len(m.Value))
	c.Total++
	c.Parts[m.Partition]++
	if m.Key != nil {
		c.Keyed++
	}
}

// Seen is how many messages were handled.
func (c *Collector) Seen() int {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return c.Total
}

// Distinct is how many distinct messages were handled.
func (c *Collector) Distinct() int {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return len(c.Counts)
}

// Running is a consumer whose Run goes on in the background.
type Running struct {
	C      drivers.Consumer
	Cancel context.CancelFunc
	Err    chan error // Run's result
}

// Consume runs c with handle in the background until Stop.
func Consume(c drivers.Consumer, handle func(*drivers.Message)) *Running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{C: c, Cancel: cancel, Err: make(chan error, 1)}
	go func() { r.Err <- c.Run(ctx, handle) }()
	return r
}

// Wait waits for Run to return and fails the test unless it returned nil.
func (r *Running) Wait(t testing.TB) {
	t.Helper()
	select {
	case err := <-r.Err:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return")
	}
}

// Stop cancels Run, checks it returned nil and closes the consumer.
func (r *Running) Stop(t testing.TB) {
	t.Helper()
	r.Cancel()
	r.Wait(t)
	if err := r.C.Close(); err != nil {
		t.Errorf("close consumer: %v", err)
	}
}

// WaitFor polls cond every 10 ms until it holds, and fails the test when
// d passes first.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
