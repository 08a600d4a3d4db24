package kafka

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planrun/planrun/drivers"
)

// sink keeps the events a driver reports.
type sink struct {
	mu  sync.Mutex
	evs []drivers.Event
}

func (s *sink) Event(e drivers.Event) {
	s.mu.Lock()
	s.evs = append(s.evs, e)
	s.mu.Unlock()
}

func (s *sink) kinds(kind string) []drivers.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []drivers.Event
	for _, e := range s.evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// A second member joining the group reassigns the partitions: the first
// member reports a rebalance with its new share.
func TestRebalanceEvents(t *testing.T) {
	tg := openEmbedded(t, nil)
	if err := tg.CreateTopic(testCtx(t, 10*time.Second), "rb", 4); err != nil {
		t.Fatal(err)
	}
	var events sink
	a := startConsumer(t, tg, drivers.ConsumerSpec{Workload: "w", Topic: "rb", Group: "g-rb", Instance: "a", Events: &events}, newCollector())
	defer a.Stop(t)
	waitFor(t, 20*time.Second, "the first member's partitions", func() bool { return a.C.(*consumer).partitions.Load() == 4 })
	if n := len(events.kinds(drivers.Rebalance)); n != 0 {
		t.Fatalf("%d rebalance events on joining, want none", n)
	}
	b := startConsumer(t, tg, drivers.ConsumerSpec{Workload: "w", Topic: "rb", Group: "g-rb", Instance: "b"}, newCollector())
	defer b.Stop(t)
	waitFor(t, 30*time.Second, "a rebalance event", func() bool { return len(events.kinds(drivers.Rebalance)) > 0 })
	waitFor(t, 30*time.Second, "the partitions shared", func() bool { return a.C.(*consumer).partitions.Load() == 2 })
	evs := events.kinds(drivers.Rebalance)
	if last := evs[len(evs)-1]; !strings.HasSuffix(last.Reason, "partitions assigned") || last.At.IsZero() {
		t.Errorf("rebalance event %+v", last)
	}
}

// Sends that fail because the broker is gone are a disconnect; the first
// send that works again is the reconnect.
func TestLinkWatch(t *testing.T) {
	var events sink
	w := drivers.LinkWatch{Sink: &events}
	w.Result(nil)
	w.Result(errString("dial tcp 127.0.0.1:9092: connect: connection refused"))
	w.Result(errString("kafka: client has run out of available brokers to talk to: connection refused"))
	w.Result(errString("message too large")) // not a connection failure
	w.Result(nil)
	w.Result(nil)
	d, r := events.kinds(drivers.Disconnected), events.kinds(drivers.Reconnected)
	if len(d) != 1 || d[0].Reason != "connection refused" || len(r) != 1 {
		t.Errorf("disconnects %+v, reconnects %+v", d, r)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
