package metrics

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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
	// A network step degraded the link to the broker, and its end; they
	// drop no connection by themselves (a cut's disconnects are events of
	// their own).
	EventNetworkFault    = "network_fault"
	EventNetworkRestored = "network_restored"
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
	// Sends by their intended send time: Due were intended inside it and
	// sent, Delayed of them were acknowledged (however late), Failed
	// failed (whenever they failed). Delayed + Failed <= Due; the rest
	// had no answer when the run ended.
	Due     int64 `json:"due"`
	Failed  int64 `json:"failed"`
	Delayed int64 `json:"delayed"`
}

// OutageTally is what one outage has counted, keyed by the time of its
// first disconnect (unix nanos): how worker processes and the series file
// carry an outage's sends.
type OutageTally struct {
	Start   int64 `json:"start"`
	Due     int64 `json:"due,omitempty"`
	Failed  int64 `json:"failed,omitempty"`
	Delayed int64 `json:"delayed,omitempty"`
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
	Clients int `json:"clients" expr:"clients"`
	// Failed and Delayed are the sends intended during an outage that
	// failed or were acknowledged, counted in the window in which they
	// failed or were acknowledged (each send in one phase).
	Failed  int64 `json:"failed" expr:"failed"`
	Delayed int64 `json:"delayed" expr:"delayed"`
}

type bucketKey struct {
	sec          int64
	kind, reason string
}

type outageRec struct {
	start, end int64 // unix nanos, as the events tell; end 0 while it lasts
	peak, of   int
	disc, rec  int64
	reasons    map[string]int64
	phase      string
	saidStart  bool // its start was announced
	saidEnd    bool // its end was announced
	// from and to bound the intended send times that belong to it (to 0
	// while it lasts): for events as they happen, when the recorder took
	// them, so that a send is in or out of it alike when sent and when
	// answered.
	from, to atomic.Int64
	// Sends intended in it: sent, acknowledged, failed.
	due, delayed, failed atomic.Int64
	// shipped is what TakeDelta has sent on already.
	shipped OutageTally
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

// Event records one connection event as it happens. It implements
// drivers.EventSink through the workload that owns the recorder.
func (r *Recorder) Event(e ConnEvent) { r.event(e, true) }

// event records a connection event; live is false for events replayed
// from another process or a file, whose outages hold sends by the events'
// own times.
func (r *Recorder) event(e ConnEvent, live bool) {
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
			cur = &outageRec{start: e.At, reasons: map[string]int64{}, phase: l.phase}
			// Published holding no send, then opened: a send that sees
			// it open sees it when answered too.
			cur.from.Store(math.MaxInt64)
			l.outages = append(l.outages, cur)
			list := append([]*outageRec(nil), l.outages...)
			r.outs.Store(&list)
			cur.from.Store(takenAt(e.At, live))
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
			cur.to.Store(max(takenAt(cur.end, live), cur.from.Load()))
		}
	case EventSendError:
		r.sendErrors.Add(1)
	case EventReceiveError:
		r.receiveErrors.Add(1)
	case EventRebalance:
		r.rebalances.Add(1)
	}
}

// takenAt is the time that bounds an outage's sends for an event of time
// at: when it was recorded, for an event taken as it happens (its time a
// moment ago), so that a send is in or out of an outage alike when it is
// sent and when it is answered; else the event's own time.
func takenAt(at int64, live bool) int64 {
	if now := time.Now().UnixNano(); live && at <= now && now-at < int64(time.Second) {
		return now
	}
	return at
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

// outageAt returns the outage an intended send time fell in, or nil.
// Outages do not overlap: the latest that began before it is the only one
// that can hold it.
func (r *Recorder) outageAt(intended int64) *outageRec {
	p := r.outs.Load()
	if p == nil {
		return nil
	}
	l := *p
	for i := len(l) - 1; i >= 0; i-- {
		o := l[i]
		if intended < o.from.Load() {
			continue
		}
		if to := o.to.Load(); to == 0 || intended <= to {
			return o
		}
		return nil
	}
	return nil
}

// tallies lists what every outage has counted so far.
func (r *Recorder) tallies() []OutageTally {
	l := &r.events
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []OutageTally
	for _, o := range l.outages {
		out = append(out, o.tally())
	}
	return out
}

func (o *outageRec) tally() OutageTally {
	return OutageTally{Start: o.start, Due: o.due.Load(), Failed: o.failed.Load(), Delayed: o.delayed.Load()}
}

// takeTallies returns what the outages counted since the previous call.
func (r *Recorder) takeTallies() []OutageTally {
	l := &r.events
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []OutageTally
	for _, o := range l.outages {
		t := o.tally()
		d := OutageTally{Start: t.Start, Due: t.Due - o.shipped.Due, Failed: t.Failed - o.shipped.Failed, Delayed: t.Delayed - o.shipped.Delayed}
		if d.Due != 0 || d.Failed != 0 || d.Delayed != 0 {
			out = append(out, d)
			o.shipped = t
		}
	}
	return out
}

// addTallies adds what another process's outages counted (offset puts
// their times on this clock) to the outage holding each one's start, or
// the latest.
func (r *Recorder) addTallies(ts []OutageTally, offset int64) {
	for _, t := range ts {
		o := r.outageAt(t.Start - offset)
		if o == nil {
			if p := r.outs.Load(); p != nil && len(*p) > 0 {
				o = (*p)[len(*p)-1]
			} else {
				continue
			}
		}
		o.due.Add(t.Due)
		o.failed.Add(t.Failed)
		o.delayed.Add(t.Delayed)
	}
}

// setTallies sets what each outage counted, as a series file says.
func (r *Recorder) setTallies(ts []OutageTally) {
	l := &r.events
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range ts {
		for _, o := range l.outages {
			if o.start == t.Start {
				o.due.Store(t.Due)
				o.failed.Store(t.Failed)
				o.delayed.Store(t.Delayed)
			}
		}
	}
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
	if o.end == 0 {
		x.End = now.Sub(start).Seconds()
	} else {
		x.End = rel(o.end)
	}
	x.Due, x.Failed, x.Delayed = o.due.Load(), o.failed.Load(), o.delayed.Load()
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
// start), clipped to it; d are the counters over the window, which count
// each send delayed or failed by an outage once, when it was answered.
func outageStats(os []Outage, from, to float64, d Counters) OutageStats {
	s := OutageStats{Failed: d.OutageFailed, Delayed: d.OutageDelayed}
	for _, o := range os {
		a, b := max(o.Start, from), min(o.End, to)
		if b < a || (b == a && o.Start < from) {
			continue
		}
		s.Seconds += b - a
		s.Count++
		s.Clients = max(s.Clients, o.Clients)
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
