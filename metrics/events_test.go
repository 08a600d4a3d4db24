package metrics

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// TestOutageFromEvents feeds a fleet of 3 clients through a broker restart:
// all disconnect within a second, two send errors, all reconnect; the
// outage, its sends and the progress lines follow.
func TestOutageFromEvents(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	c := NewCollector(start)
	r := NewRecorder("devices", "produce", Role{Sends: true})
	c.Add(r)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	ev := func(kind, reason string, client int, s float64) {
		r.Event(ConnEvent{Kind: kind, Reason: reason, Client: client, Of: 3, At: at(s).UnixNano()})
	}

	r.Acked(10, 10*time.Millisecond, at(1))
	c.StartPhase("restart", at(2))
	for i := range 3 {
		ev(EventDisconnected, "connection closed", i, 5+0.1*float64(i))
	}
	// A client that drops twice in one outage is one client down.
	ev(EventDisconnected, "connection refused", 1, 5.5)
	if got := c.Announcements(at(5.9)); len(got) != 0 {
		t.Fatalf("announced before the second was over: %q", got)
	}
	got := c.Announcements(at(6.1))
	want := []string{"devices: 3/3 clients disconnected (connection closed) at 00:00:05"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("announcements at 6.1 s:\n got %q\nwant %q", got, want)
	}
	// Failed by their intended send time, inside the outage.
	r.Failed(at(5.8))
	r.Failed(at(6.2))
	ev(EventSendError, "timeout", 0, 7.2)
	ev(EventSendError, "timeout", 2, 7.4)
	// Intended at 6 s, acked at 9 s: delayed by the outage.
	r.Acked(10, 3*time.Second, at(9))
	ev(EventReconnected, "", 0, 8)
	ev(EventReconnected, "", 2, 8.5)
	snap := c.Snapshot(at(8.6), false)
	if o := snap.Workloads["devices"].Outage; o.Count != 1 || o.Seconds < 3.59 || o.Seconds > 3.61 {
		t.Fatalf("ongoing outage at 8.6 s: %+v, want 1 lasting 3.6 s", o)
	}
	ev(EventReconnected, "", 1, 11)
	// Reconnecting a client that never dropped changes nothing.
	ev(EventReconnected, "", 1, 11.5)
	r.Acked(10, time.Millisecond, at(12))

	got = c.Announcements(at(12.5))
	want = []string{
		"devices: 3/3 clients disconnected (connection closed) at 00:00:05; reconnected 3 by 00:00:11 (6.0 s without every connection)",
		"devices: 2 send errors (timeout) at 00:00:07",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("announcements at 12.5 s:\n got %q\nwant %q", got, want)
	}
	if again := c.Announcements(at(20)); len(again) != 0 {
		t.Fatalf("announced twice: %q", again)
	}

	c.StartPhase("after", at(13))
	fin := c.Finish(at(14))
	if len(fin.Outages) != 1 {
		t.Fatalf("outages: %+v", fin.Outages)
	}
	o := fin.Outages[0]
	wantO := Outage{Workload: "devices", Phase: "restart", Start: 5, End: 11, Ended: true, Clients: 3, Of: 3,
		Disconnects: 3, Reconnects: 3, Reason: "connection closed", Failed: 2, Delayed: 1}
	if !reflect.DeepEqual(o, wantO) {
		t.Fatalf("outage:\n got %+v\nwant %+v", o, wantO)
	}
	ph := map[string]Stats{}
	for _, p := range fin.Phases {
		ph[p.Name] = p.Workloads["devices"]
	}
	if s := ph["restart"]; s.Outage.Seconds != 6 || s.Outage.Failed != 2 || s.Outage.Delayed != 1 ||
		s.Events != (EventStats{Disconnects: 4, Reconnects: 4, SendErrors: 2}) {
		t.Fatalf("phase restart: outage %+v events %+v", s.Outage, s.Events)
	}
	if s := ph["after"]; s.Outage != (OutageStats{}) || s.Events != (EventStats{}) {
		t.Fatalf("phase after: outage %+v events %+v", s.Outage, s.Events)
	}
	// Per second: disconnects at 5 (closed, refused), send errors at 7,
	// reconnects at 8 and 11.
	var rows []string
	for _, e := range fin.Events {
		rows = append(rows, fmt.Sprintf("%g %s %s %d", e.T, e.Event, e.Reason, e.Count))
	}
	wantRows := []string{"5 disconnected connection closed 3", "5 disconnected connection refused 1", "7 send_error timeout 2", "8 reconnected  2", "11 reconnected  2"}
	if !reflect.DeepEqual(rows, wantRows) {
		t.Fatalf("events per second:\n got %q\nwant %q", rows, wantRows)
	}
}

// TestEventsTravelInDeltas: a worker's events replay on the conductor's
// recorder on its clock.
func TestEventsTravelInDeltas(t *testing.T) {
	w := NewRecorder("p", "produce", Role{Sends: true})
	var prev Counters
	if _, err := w.TakeDelta(&prev); err != nil {
		t.Fatal(err)
	}
	base := time.Unix(2_000_000, 0)
	w.Event(ConnEvent{Kind: EventDisconnected, Reason: "connection reset", Client: 4, Of: 8, At: base.UnixNano()})
	w.Event(ConnEvent{Kind: EventReconnected, Client: 4, Of: 8, At: base.Add(2 * time.Second).UnixNano()})
	d, err := w.TakeDelta(&prev)
	if err != nil {
		t.Fatal(err)
	}
	c := NewRecorder("p", "produce", Role{Sends: true})
	if err := c.ApplyDelta(d, int64(time.Second)); err != nil {
		t.Fatal(err)
	}
	os := c.outageList(base.Add(-10*time.Second), base)
	if len(os) != 1 || os[0].Start != 9 || os[0].End != 11 || os[0].Clients != 1 || os[0].Of != 8 {
		t.Fatalf("replayed outage: %+v", os)
	}
	if got := c.Counters(); got.Disconnects != 1 || got.Reconnects != 1 {
		t.Fatalf("replayed counters: %+v", got)
	}
}

// A run killed after an outage still has it: its events travel in the
// series file and the outage is rebuilt from them.
func TestSeriesKeepsEvents(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := NewCollector(t0)
	var file bytes.Buffer
	c.SetSink(&file, "")
	c.SetSeriesHeader(SeriesHeader{})
	r := NewRecorder("devices", "produce", Role{Sends: true})
	c.Add(r)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	c.StartPhase("run", at(0.1))
	c.Sample(at(1))
	for i := range 4 {
		r.Event(ConnEvent{Kind: EventDisconnected, Reason: "connection refused", Client: i, Of: 4, At: at(1.5).UnixNano()})
	}
	r.Sent(at(1.6))
	r.Failed(at(1.6))
	c.Sample(at(2))
	for i := range 4 {
		r.Event(ConnEvent{Kind: EventReconnected, Client: i, Of: 4, At: at(3.5).UnixNano()})
	}
	c.Sample(at(4))
	want := c.Finish(at(4))

	runs, err := ReadSeries(&file)
	if err != nil {
		t.Fatal(err)
	}
	got := runs[0].Metrics
	if !reflect.DeepEqual(got.Events, want.Events) {
		t.Errorf("events from the series file:\n got %+v\nwant %+v", got.Events, want.Events)
	}
	if len(got.Outages) != 1 || !reflect.DeepEqual(got.Outages, want.Outages) {
		t.Errorf("outages from the series file:\n got %+v\nwant %+v", got.Outages, want.Outages)
	}
	if g, w := got.Workloads["devices"], want.Workloads["devices"]; g.Events != w.Events || g.Outage != w.Outage || w.Outage.Seconds != 2 {
		t.Errorf("devices: events %+v outage %+v, want %+v %+v", g.Events, g.Outage, w.Events, w.Outage)
	}
}

// BenchmarkAcked is the cost of counting one acknowledged send, with no
// outage on record and with one the send's intended time is checked
// against.
func BenchmarkAcked(b *testing.B) {
	for _, outage := range []bool{false, true} {
		b.Run(fmt.Sprintf("outage=%v", outage), func(b *testing.B) {
			r := NewRecorder("p", "produce", Role{Sends: true})
			now := time.Now()
			if outage {
				r.Event(ConnEvent{Kind: EventDisconnected, Of: 1, At: now.Add(-time.Hour).UnixNano()})
				r.Event(ConnEvent{Kind: EventReconnected, Of: 1, At: now.Add(-time.Minute).UnixNano()})
			}
			b.ReportAllocs()
			for b.Loop() {
				r.Acked(100, time.Millisecond, now)
			}
		})
	}
}

// Sends count in an outage by their intended send time: an ack that comes
// after every client reconnected is still delayed by it, a send that
// failed after it but was intended in it is its failure, one intended
// before it that failed in it is not. Every outage keeps its own window
// and sends, and a phase counts each send once, when it was answered,
// even when an outage spans two phases.
func TestOutageCountsByIntendedTime(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	c := NewCollector(start)
	r := NewRecorder("devices", "produce", Role{Sends: true})
	c.Add(r)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	ev := func(kind string, s float64) {
		r.Event(ConnEvent{Kind: kind, Client: 0, Of: 1, At: at(s).UnixNano()})
	}
	send := func(intended, answered float64, ok bool) {
		r.Sent(at(intended))
		if ok {
			r.Acked(10, at(answered).Sub(at(intended)), at(answered))
		} else {
			r.Failed(at(intended))
		}
	}
	c.StartPhase("a", at(1))
	ev(EventDisconnected, 2) // first outage: 2 s to 4 s, across phases a and b
	send(1.9, 2.5, false)    // intended before it: not its failure
	send(2.1, 2.2, false)
	c.StartPhase("b", at(3))
	send(2.5, 3.5, true)
	send(2.8, 3.2, false)
	send(3.5, 6.0, true) // acked long after the reconnect
	ev(EventReconnected, 4)
	send(3.9, 9.0, true)
	send(3.95, 9.5, false)    // failed late, intended inside
	send(4.5, 4.6, true)      // after it
	ev(EventDisconnected, 10) // second outage: 10 s to 11 s
	send(10.5, 12, true)
	send(10.6, 10.7, false)
	ev(EventReconnected, 11)
	send(11.5, 11.6, true)
	fin := c.Finish(at(13))

	if len(fin.Outages) != 2 {
		t.Fatalf("outages: %+v", fin.Outages)
	}
	type sends struct{ due, delayed, failed int64 }
	for i, want := range []sends{{due: 6, delayed: 3, failed: 3}, {due: 2, delayed: 1, failed: 1}} {
		o := fin.Outages[i]
		if got := (sends{o.Due, o.Delayed, o.Failed}); got != want {
			t.Errorf("outage %d (%.0f-%.0f s): %+v, want %+v", i, o.Start, o.End, got, want)
		}
	}
	ph := map[string]OutageStats{}
	for _, p := range fin.Phases {
		ph[p.Name] = p.Workloads["devices"].Outage
	}
	// Phase a: the failures at 2.2 and 2.5 s (one intended before the
	// outage); b: everything answered from 3 s on.
	if a, b := ph["a"], ph["b"]; a.Failed != 1 || a.Delayed != 0 || b.Failed != 3 || b.Delayed != 4 || a.Count != 1 || b.Count != 2 {
		t.Errorf("phases: a %+v, b %+v", a, b)
	}
	run := fin.Workloads["devices"].Outage
	if run.Failed != 4 || run.Delayed != 4 || run.Failed != ph["a"].Failed+ph["b"].Failed || run.Delayed != ph["a"].Delayed+ph["b"].Delayed {
		t.Errorf("run %+v, phases %+v", run, ph)
	}
}
