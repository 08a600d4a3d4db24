package metrics

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kinds of connection events, as drivers report them (package drivers has
// the same names).
const (
	EventDisconnected = "disconnected"
	EventReconnected  = "reconnected"
	EventSendError    = "send_error"
	EventReceiveError = "receive_error"
	EventRebalance    = "rebalance"
)

// ConnEvent is one connection event of a workload: a client disconnected or
// reconnected, a send or receive failed, a group rebalanced.
type ConnEvent struct {
	Kind   string `json:"kind"`
	Reason string `json:"reason,omitempty"`
	Client int    `json:"client,omitempty"`
	Of     int    `json:"of,omitempty"`
	At     int64  `json:"at"` // unix nanos
}

// EventCount is how many events of one kind and reason a workload had in
// one second of the run.
type EventCount struct {
	T        float64 `json:"t"` // start of the second, seconds since the run started
	Workload string  `json:"workload"`
	Event    string  `json:"event"`
	Reason   string  `json:"reason,omitempty"`
	Count    int64   `json:"count"`
	// Of is how many connections the workload held (clients of a fleet).
	Of int `json:"of,omitempty"`
}

// Outage is a stretch of time during which at least one of a workload's
// connections was down: from the first disconnect until every client that
// lost its connection had it back.
type Outage struct {
	Workload string  `json:"workload"`
	Phase    string  `json:"phase,omitempty"` // the phase it began in
	Start    float64 `json:"start_s"`
	End      float64 `json:"end_s"` // the run's end when not Ended
	Ended    bool    `json:"ended"`
	// Clients is the most connections down at once, Of how many the
	// workload held; Disconnects and Reconnects count every event in it.
	Clients     int    `json:"clients"`
	Of          int    `json:"of"`
	Disconnects int64  `json:"disconnects"`
	Reconnects  int64  `json:"reconnects"`
	Reason      string `json:"reason,omitempty"` // the most frequent disconnect reason
	// Failed are sends that failed while it lasted; Delayed are sends
	// acknowledged with their intended send time inside it.
	Failed  int64 `json:"failed"`
	Delayed int64 `json:"delayed"`
}

// Duration is the outage's length in seconds.
func (o Outage) Duration() float64 { return o.End - o.Start }

// EventStats counts a workload's connection events over a window.
type EventStats struct {
	Disconnects   int64 `json:"disconnects" expr:"disconnects"`
	Reconnects    int64 `json:"reconnects" expr:"reconnects"`
	SendErrors    int64 `json:"send_errors" expr:"send_errors"`
	ReceiveErrors int64 `json:"receive_errors" expr:"receive_errors"`
	Rebalances    int64 `json:"rebalances" expr:"rebalances"`
}

// OutageStats sums up a workload's outages over a window.
type OutageStats struct {
	// Seconds without every connection working, clipped to the window.
	Seconds float64 `json:"seconds" expr:"seconds"`
	Count   int     `json:"count" expr:"count"`
	// Clients is the most connections down at once.
	Clients int   `json:"clients" expr:"clients"`
	Failed  int64 `json:"failed" expr:"failed"`
	Delayed int64 `json:"delayed" expr:"delayed"`
}

type bucketKey struct {
	sec          int64
	kind, reason string
}

type outageRec struct {
	start, end int64 // unix nanos; end 0 while it lasts
	peak, of   int
	disc, rec  int64
	reasons    map[string]int64
	phase      string
	saidStart  bool // its start was announced
	saidEnd    bool // its end was announced
	// failed and delayed are counted in the recorder's counters; these
	// are the counters' values when the outage began and ended.
	failed0, delayed0, failed1, delayed1 int64
}

// eventLog is a recorder's connection events: per-second counts and the
// outages they make up. Events are rare next to messages: a mutex is fine.
type eventLog struct {
	mu      sync.Mutex
	buckets map[bucketKey]*EventCount
	order   []bucketKey
	of      int
	down    map[int]struct{}
	outages []*outageRec
	said    int  // buckets[order[:said]] have been announced
	ship    bool // keep raw events for TakeDelta
	pending []ConnEvent
	// toFile keeps raw events for the series file too (fileQueue).
	toFile    bool
	fileQueue []ConnEvent
	phase     string
}

// Event records one connection event. It implements drivers.EventSink
// through the workload that owns the recorder.
func (r *Recorder) Event(e ConnEvent) {
	l := &r.events
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[bucketKey]*EventCount{}
		l.down = map[int]struct{}{}
	}
	if l.ship {
		l.pending = append(l.pending, e)
	}
	if l.toFile {
		l.fileQueue = append(l.fileQueue, e)
	}
	if e.Of > l.of {
		l.of = e.Of
	}
	k := bucketKey{sec: e.At / 1e9, kind: e.Kind, reason: e.Reason}
	b := l.buckets[k]
	if b == nil {
		b = &EventCount{Event: e.Kind, Reason: e.Reason}
		l.buckets[k] = b
		l.order = append(l.order, k)
	}
	b.Count++
	b.Of = max(b.Of, e.Of)
	switch e.Kind {
	case EventDisconnected:
		r.disconnects.Add(1)
		if _, ok := l.down[e.Client]; ok {
			return
		}
		l.down[e.Client] = struct{}{}
		cur := l.current()
		if cur == nil {
			cur = &outageRec{start: e.At, reasons: map[string]int64{}, phase: l.phase,
				failed0: r.failed.Load(), delayed0: r.outDelayed.Load()}
			l.outages = append(l.outages, cur)
			r.outStart.Store(e.At)
			r.outEnd.Store(0)
		}
		cur.disc++
		cur.reasons[e.Reason]++
		cur.peak = max(cur.peak, len(l.down))
		cur.of = max(cur.of, e.Of)
	case EventReconnected:
		r.reconnects.Add(1)
		if _, ok := l.down[e.Client]; !ok {
			return
		}
		delete(l.down, e.Client)
		cur := l.current()
		if cur == nil {
			return
		}
		cur.rec++
		if len(l.down) == 0 {
			cur.end = max(e.At, cur.start)
			cur.failed1, cur.delayed1 = r.failed.Load(), r.outDelayed.Load()
			r.outEnd.Store(cur.end)
		}
	case EventSendError:
		r.sendErrors.Add(1)
	case EventReceiveError:
		r.receiveErrors.Add(1)
	case EventRebalance:
		r.rebalances.Add(1)
	}
}

// current is the outage going on, or nil.
func (l *eventLog) current() *outageRec {
	if n := len(l.outages); n > 0 && l.outages[n-1].end == 0 {
		return l.outages[n-1]
	}
	return nil
}

// setPhase names the phase outages beginning from now on belong to.
func (r *Recorder) setPhase(name string) {
	r.events.mu.Lock()
	r.events.phase = name
	r.events.mu.Unlock()
}

// inOutage reports whether an intended send time fell in the latest outage.
func (r *Recorder) inOutage(intended int64) bool {
	s := r.outStart.Load()
	if s == 0 || intended < s {
		return false
	}
	e := r.outEnd.Load()
	return e == 0 || intended <= e
}

// InOutage reports whether an outage of the workload goes on: some of its
// connections are down.
func (r *Recorder) InOutage() bool {
	r.events.mu.Lock()
	defer r.events.mu.Unlock()
	return r.events.current() != nil
}

// eventCounts lists the per-second event counts, oldest first, with times
// relative to start.
func (r *Recorder) eventCounts(start time.Time) []EventCount {
	l := &r.events
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]EventCount, 0, len(l.order))
	for _, k := range l.order {
		b := *l.buckets[k]
		b.T = float64(max(k.sec-start.Unix(), 0))
		b.Workload = r.Name
		out = append(out, b)
	}
	return out
}

// outageList lists the outages with times relative to start; one still
// going on ends at now.
func (r *Recorder) outageList(start, now time.Time) []Outage {
	l := &r.events
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Outage, 0, len(l.outages))
	for _, o := range l.outages {
		out = append(out, r.outageOf(o, start, now))
	}
	return out
}

func (r *Recorder) outageOf(o *outageRec, start, now time.Time) Outage {
	rel := func(ns int64) float64 { return time.Unix(0, ns).Sub(start).Seconds() }
	x := Outage{Workload: r.Name, Phase: o.phase, Start: rel(o.start), Ended: o.end != 0, Clients: o.peak, Of: o.of,
		Disconnects: o.disc, Reconnects: o.rec, Reason: topReason(o.reasons)}
	f1, d1 := o.failed1, o.delayed1
	if o.end == 0 {
		x.End = now.Sub(start).Seconds()
		f1, d1 = r.failed.Load(), r.outDelayed.Load()
	} else {
		x.End = rel(o.end)
	}
	x.Failed, x.Delayed = f1-o.failed0, d1-o.delayed0
	return x
}

func topReason(m map[string]int64) string {
	best, n := "", int64(-1)
	for k, v := range m {
		if v > n || (v == n && k < best) {
			best, n = k, v
		}
	}
	return best
}

// outageStats sums the outages that overlap [from, to] (seconds since
// start), clipped to it.
func outageStats(os []Outage, from, to float64) OutageStats {
	var s OutageStats
	for _, o := range os {
		a, b := max(o.Start, from), min(o.End, to)
		if b < a || (b == a && o.Start < from) {
			continue
		}
		s.Seconds += b - a
		s.Count++
		s.Clients = max(s.Clients, o.Clients)
		s.Failed += o.Failed
		s.Delayed += o.Delayed
	}
	return s
}

// announce returns the lines progress output prints for events since the
// last call: a disconnect of clients when an outage begins, a line when it
// ends, and per-second counts of the other events (never a line per
// client). Seconds before now's are complete and are announced once.
func (r *Recorder) announce(start, now time.Time) []string {
	l := &r.events
	l.mu.Lock()
	defer l.mu.Unlock()
	var lines []string
	at := func(ns int64) string { return clockOf(time.Unix(0, ns).Sub(start)) }
	nowSec := now.Unix()
	for _, o := range l.outages {
		switch {
		case o.end != 0 && !o.saidEnd:
			// One line with both ends when it is over, even if the start
			// had a line of its own.
			o.saidStart, o.saidEnd = true, true
			lines = append(lines, r.outageLine(o, at))
		case o.end == 0 && !o.saidStart && o.start/1e9 < nowSec:
			// Announced once the second it began in is complete, so the
			// count covers the clients that dropped together.
			o.saidStart = true
			lines = append(lines, fmt.Sprintf("%s: %d/%d clients disconnected (%s) at %s", r.Name, o.peak, o.of, topReason(o.reasons), at(o.start)))
		}
	}
	// Other events: each complete second once, grouped by kind and reason.
	sort.SliceStable(l.order[l.said:], func(i, j int) bool { return l.order[l.said+i].sec < l.order[l.said+j].sec })
	for l.said < len(l.order) && l.order[l.said].sec < nowSec {
		k := l.order[l.said]
		l.said++
		if k.kind == EventDisconnected || k.kind == EventReconnected {
			continue
		}
		b := l.buckets[k]
		what := strings.ReplaceAll(k.kind, "_", " ")
		if b.Count != 1 {
			what += "s"
		}
		line := fmt.Sprintf("%s: %d %s", r.Name, b.Count, what)
		if k.reason != "" {
			line += " (" + k.reason + ")"
		}
		lines = append(lines, line+" at "+clockOf(time.Unix(k.sec, 0).Sub(start.Truncate(time.Second))))
	}
	return lines
}

func (r *Recorder) outageLine(o *outageRec, at func(int64) string) string {
	return fmt.Sprintf("%s: %d/%d clients disconnected (%s) at %s; reconnected %d by %s (%.1f s without every connection)",
		r.Name, o.peak, o.of, topReason(o.reasons), at(o.start), o.rec, at(o.end), float64(o.end-o.start)/1e9)
}

// clockOf formats a time since the run's start as hh:mm:ss.
func clockOf(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// takeEvents returns the raw events recorded since the previous call and,
// from the first call on, keeps recording them for the next.
func (r *Recorder) takeEvents() []ConnEvent {
	l := &r.events
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ship = true
	out := l.pending
	l.pending = nil
	return out
}

// keepEventsForFile makes the recorder keep its raw events until the
// collector writes them to the series file (takeFileEvents).
func (r *Recorder) keepEventsForFile() {
	r.events.mu.Lock()
	r.events.toFile = true
	r.events.mu.Unlock()
}

// takeFileEvents returns the raw events recorded since the previous call.
func (r *Recorder) takeFileEvents() []ConnEvent {
	l := &r.events
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.fileQueue
	l.fileQueue = nil
	return out
}
