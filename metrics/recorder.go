package metrics

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Role says what a workload does. Figures, reports and charts ask the role
// (does it send? receive?) rather than the name of its kind.
type Role struct {
	Sends    bool `json:"sends,omitempty"`
	Receives bool `json:"receives,omitempty"`
	Connects bool `json:"connects,omitempty"`
}

// Relays is a role that receives and sends what it received.
func (r Role) Relays() bool { return r.Sends && r.Receives }

// Produces is a role measured by what it sends: it sends and receives
// nothing. Every other role is measured by what it receives.
func (r Role) Produces() bool { return r.Sends && !r.Receives }

// Recorder is what a running workload counts into. Every method is safe
// for concurrent use and allocation-free.
type Recorder struct {
	Name string
	Kind string // the workload's kind: produce, consume, relay...
	Role Role

	// cut is held shared while one message is counted (its counters and
	// its latency) and exclusively while a snapshot reads them all, so that
	// every message and its latency fall on one side of every cut.
	cut                       sync.RWMutex
	sent, acked, failed       atomic.Int64
	received, untracked       atomic.Int64
	distinct                  atomic.Int64
	bytesAcked, bytesReceived atomic.Int64
	duplicates, reordered     atomic.Int64
	firstNanos, lastNanos     atomic.Int64 // unix nanos of first/last acked or received message
	lastLatency               atomic.Int64 // nanos, end-to-end of the last received message
	running                   atomic.Bool
	stopping                  atomic.Bool // stopped by the plan, not yet finished
	SendLatency, EndToEnd     *Histogram
	gauges                    atomic.Pointer[func() map[string]float64]
	backlog                   atomic.Pointer[func() Backlog]
	lag                       atomic.Int64 // broker-reported lag, -1 unknown
	lagAt                     atomic.Int64 // unix nanos the lag was measured
	// ackSpan and recvSpan time the acks and receipts since they were
	// last taken (takeSpans): a short phase's rates run over them.
	ackSpan, recvSpan span
	lost              atomic.Pointer[func() int64]

	// Connection events: counts, every outage (copy on write, read by
	// every ack) and the sends intended during outages that were acked
	// (delayed) or failed.
	disconnects, reconnects   atomic.Int64
	sendErrors, receiveErrors atomic.Int64
	rebalances                atomic.Int64
	outDelayed, outFailed     atomic.Int64
	outs                      atomic.Pointer[[]*outageRec]
	events                    eventLog

	// runMu guards the running time: runFor until runSince, when the
	// workload last started (zero while it is stopped).
	runMu    sync.Mutex
	runSince time.Time
	runFor   time.Duration
}

// NewRecorder returns a recorder for one workload.
func NewRecorder(name, kind string, role Role) *Recorder {
	r := &Recorder{Name: name, Kind: kind, Role: role, SendLatency: NewHistogram(), EndToEnd: NewHistogram()}
	r.lag.Store(-1)
	return r
}

// SetBacklog installs how this consumer's backlog is computed.
func (r *Recorder) SetBacklog(f func() Backlog) { r.backlog.Store(&f) }

// SetLost installs how many acked messages this consumer's group has not received.
func (r *Recorder) SetLost(f func() int64) { r.lost.Store(&f) }

// SetLag stores the broker-reported lag (-1 when unknown), measured now.
func (r *Recorder) SetLag(n int64) { r.SetLagAt(n, time.Now()) }

// SetLagAt stores the broker-reported lag as measured at a given time.
func (r *Recorder) SetLagAt(n int64, at time.Time) {
	r.lag.Store(n)
	r.lagAt.Store(at.UnixNano())
}

func (r *Recorder) backlogValue() Backlog {
	if f := r.backlog.Load(); f != nil {
		return (*f)()
	}
	return Backlog{}
}

// Pending is the backlog as the accounting counts it now (zero for a
// workload without one).
func (r *Recorder) Pending() Backlog { return r.backlogValue() }

func (r *Recorder) lostValue() int64 {
	if f := r.lost.Load(); f != nil {
		return (*f)()
	}
	return 0
}

func (r *Recorder) touch(now int64) {
	r.firstNanos.CompareAndSwap(0, now)
	r.lastNanos.Store(now)
}

// Sent counts one send attempt intended at due: one intended during an
// outage counts among the sends due in it.
func (r *Recorder) Sent(due time.Time) {
	r.sent.Add(1)
	if o := r.outageAt(due.UnixNano()); o != nil {
		o.due.Add(1)
	}
}

// Acked counts one acknowledged message of size bytes and its latency from
// the intended send time.
func (r *Recorder) Acked(bytes int, latency time.Duration, now time.Time) {
	r.cut.RLock()
	r.acked.Add(1)
	r.bytesAcked.Add(int64(bytes))
	r.SendLatency.Record(latency)
	// A short phase's send rate is the rate its acked messages were meant
	// to be sent at: acks may come back in one batch.
	r.ackSpan.touch(now.UnixNano() - int64(latency))
	// Every ack of a send intended during an outage is delayed by it,
	// however late the ack comes.
	if o := r.outageAt(now.UnixNano() - int64(latency)); o != nil {
		o.delayed.Add(1)
		r.outDelayed.Add(1)
	}
	r.cut.RUnlock()
	// first_at/last_at time what a workload is for: sends for producers,
	// receipts for consumers and relays (a hop's "time to receive all N").
	if r.Role.Produces() {
		r.touch(now.UnixNano())
	}
}

// Failed counts one send intended at due that the broker refused or that
// timed out; one intended during an outage is an outage's failed send,
// whenever it failed.
func (r *Recorder) Failed(due time.Time) {
	r.failed.Add(1)
	if o := r.outageAt(due.UnixNano()); o != nil {
		o.failed.Add(1)
		r.outFailed.Add(1)
	}
}

// Received counts one received message seen for the first time; e2e < 0
// means the message carried no planrun header (no end-to-end latency,
// counted as untracked rather than distinct).
func (r *Recorder) Received(bytes int, e2e time.Duration, now time.Time) {
	r.Receipt(bytes, e2e, now, false, false)
}

// Receipt counts one received message with what the sequence tracker
// found: dup means it was received before (a duplicate, not distinct),
// reordered that it arrived after a later one of its stream. Every
// received message is exactly one of distinct, duplicate or untracked.
func (r *Recorder) Receipt(bytes int, e2e time.Duration, now time.Time, dup, reordered bool) {
	r.cut.RLock()
	r.received.Add(1)
	r.bytesReceived.Add(int64(bytes))
	switch {
	case e2e < 0:
		r.untracked.Add(1)
	case dup:
		r.duplicates.Add(1)
	default:
		r.distinct.Add(1)
	}
	if reordered {
		r.reordered.Add(1)
	}
	if e2e >= 0 {
		r.EndToEnd.Record(e2e)
		r.lastLatency.Store(int64(e2e))
	}
	r.recvSpan.touch(now.UnixNano())
	r.cut.RUnlock()
	r.touch(now.UnixNano())
}

// AddDuplicates counts n messages found to be duplicates elsewhere (a
// conductor merging shards that received the same message on different
// workers): each was counted distinct where it was received.
func (r *Recorder) AddDuplicates(n int64) {
	r.cut.RLock()
	r.duplicates.Add(n)
	r.distinct.Add(-n)
	r.cut.RUnlock()
}

// SetRunning marks the workload running or stopped.
func (r *Recorder) SetRunning(b bool) { r.SetRunningAt(b, time.Now()) }

// SetRunningAt is SetRunning at a given instant. Saying the state the
// workload is already in changes nothing. A workload that starts again is
// no longer being stopped; one still reported running while a stop is
// under way is.
func (r *Recorder) SetRunningAt(b bool, at time.Time) {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	switch {
	case b && r.runSince.IsZero():
		r.runSince = at
	case !b && !r.runSince.IsZero():
		r.runFor += max(0, at.Sub(r.runSince))
		r.runSince = time.Time{}
	}
	if !b {
		r.running.Store(false)
		return
	}
	if !r.running.Swap(true) {
		r.stopping.Store(false)
	}
}

// Stopping marks the workload as being stopped, until it runs again: its
// driver gauges from now on (connections closing) are not what it ran
// with, and a phase keeps those of its last sample before.
func (r *Recorder) Stopping() { r.stopping.Store(true) }

// RunningTime is how long the workload has run up to now, over all its
// starts and stops: what a rate over an interval in which it started or
// stopped is divided by.
func (r *Recorder) RunningTime(now time.Time) time.Duration {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	d := r.runFor
	if !r.runSince.IsZero() {
		d += max(0, now.Sub(r.runSince))
	}
	return d
}

// SetGauges installs a function read at every sample for driver figures.
func (r *Recorder) SetGauges(f func() map[string]float64) {
	if f == nil {
		r.gauges.Store(nil)
		return
	}
	r.gauges.Store(&f)
}

// Span is when the first and the last of some messages came, in unix
// nanos (0: none).
type Span struct {
	First int64 `json:"first,omitempty"`
	Last  int64 `json:"last,omitempty"`
}

// Add widens s to cover o.
func (s *Span) Add(o Span) {
	if o.First == 0 {
		return
	}
	if s.First == 0 || o.First < s.First {
		s.First = o.First
	}
	s.Last = max(s.Last, o.Last, o.First)
}

// Shift moves the span's times by -offset (to another process's clock).
func (s Span) Shift(offset int64) Span {
	if s.First == 0 {
		return s
	}
	return Span{First: s.First - offset, Last: s.Last - offset}
}

// MinSpan is the shortest span a rate is told from: messages that all
// came within it came in one burst (a batch of acks or of records), whose
// rate says nothing.
const MinSpan = 10 * time.Millisecond

// Rate is n messages over the span, counted from the first to the last:
// (n - 1) gaps over the time between them; NaN when that is not known
// (fewer than two messages, or all within MinSpan).
func (s Span) Rate(n int64) float64 {
	d := time.Duration(s.Last - s.First)
	if n < 2 || s.First == 0 || d < MinSpan {
		return math.NaN()
	}
	return float64(n-1) / d.Seconds()
}

// span times messages as they come, until taken: the earliest and the
// latest time seen.
type span struct{ first, last atomic.Int64 }

func (s *span) touch(at int64) { s.add(Span{First: at, Last: at}) }

// add widens the span to cover o (from another process's delta).
func (s *span) add(o Span) {
	if o.First == 0 {
		return
	}
	for {
		cur := s.first.Load()
		if (cur != 0 && cur <= o.First) || s.first.CompareAndSwap(cur, o.First) {
			break
		}
	}
	for {
		cur := s.last.Load()
		if cur >= o.Last || s.last.CompareAndSwap(cur, o.Last) {
			break
		}
	}
}

// take returns the span so far and starts a new one.
func (s *span) take() Span {
	out := Span{First: s.first.Swap(0), Last: s.last.Swap(0)}
	if out.First != 0 && out.Last < out.First {
		// A message came between the two swaps: its time opens the next span.
		out.Last = out.First
	}
	return out
}

// peek returns the span so far.
func (s *span) peek() Span {
	out := Span{First: s.first.Load(), Last: s.last.Load()}
	if out.First != 0 && out.Last < out.First {
		out.Last = out.First
	}
	return out
}

// takeSpans returns the spans of acks and receipts since the previous call.
func (r *Recorder) takeSpans() (acks, recvs Span) { return r.ackSpan.take(), r.recvSpan.take() }

// Counters is a plain copy of a recorder's counters at one instant.
type Counters struct {
	Sent          int64 `json:"sent"`
	Acked         int64 `json:"acked"`
	Failed        int64 `json:"failed"`
	Received      int64 `json:"received"`
	Distinct      int64 `json:"distinct,omitempty"`
	Untracked     int64 `json:"untracked"`
	BytesAcked    int64 `json:"bytes_acked"`
	BytesReceived int64 `json:"bytes_received"`
	Duplicates    int64 `json:"duplicates"`
	Reordered     int64 `json:"reordered"`
	// Connection events (see Event) and sends acked late because of an
	// outage.
	Disconnects   int64 `json:"disconnects,omitempty"`
	Reconnects    int64 `json:"reconnects,omitempty"`
	SendErrors    int64 `json:"send_errors,omitempty"`
	ReceiveErrors int64 `json:"receive_errors,omitempty"`
	Rebalances    int64 `json:"rebalances,omitempty"`
	OutageDelayed int64 `json:"outage_delayed,omitempty"`
	OutageFailed  int64 `json:"outage_failed,omitempty"`
}

// Sub returns c - o, field by field.
func (c Counters) Sub(o Counters) Counters {
	return Counters{
		Sent: c.Sent - o.Sent, Acked: c.Acked - o.Acked, Failed: c.Failed - o.Failed,
		Received: c.Received - o.Received, Distinct: c.Distinct - o.Distinct, Untracked: c.Untracked - o.Untracked,
		BytesAcked: c.BytesAcked - o.BytesAcked, BytesReceived: c.BytesReceived - o.BytesReceived,
		Duplicates: c.Duplicates - o.Duplicates, Reordered: c.Reordered - o.Reordered,
		Disconnects: c.Disconnects - o.Disconnects, Reconnects: c.Reconnects - o.Reconnects,
		SendErrors: c.SendErrors - o.SendErrors, ReceiveErrors: c.ReceiveErrors - o.ReceiveErrors,
		Rebalances: c.Rebalances - o.Rebalances, OutageDelayed: c.OutageDelayed - o.OutageDelayed,
		OutageFailed: c.OutageFailed - o.OutageFailed,
	}
}

// Counters reads the counters.
func (r *Recorder) Counters() Counters {
	return Counters{
		Sent: r.sent.Load(), Acked: r.acked.Load(), Failed: r.failed.Load(),
		Received: r.received.Load(), Distinct: r.distinct.Load(), Untracked: r.untracked.Load(),
		BytesAcked: r.bytesAcked.Load(), BytesReceived: r.bytesReceived.Load(),
		Duplicates: r.duplicates.Load(), Reordered: r.reordered.Load(),
		Disconnects: r.disconnects.Load(), Reconnects: r.reconnects.Load(),
		SendErrors: r.sendErrors.Load(), ReceiveErrors: r.receiveErrors.Load(),
		Rebalances: r.rebalances.Load(), OutageDelayed: r.outDelayed.Load(),
		OutageFailed: r.outFailed.Load(),
	}
}

// snapshot reads the counters and drains the histograms at one instant
// (see cut): what it returns closes one window and what is recorded after
// it opens the next. The histograms come from hdrPool.
func (r *Recorder) snapshot() (Counters, hists) {
	send, e2e := hdrPool.Get().(*hdr.Histogram), hdrPool.Get().(*hdr.Histogram)
	r.cut.Lock()
	defer r.cut.Unlock()
	return r.Counters(), hists{send: r.SendLatency.Drain(send), e2e: r.EndToEnd.Drain(e2e)}
}

// gaugeValues reads the driver's gauges, if any.
func (r *Recorder) gaugeValues() map[string]float64 {
	if f := r.gauges.Load(); f != nil {
		return (*f)()
	}
	return nil
}

// hists holds the merged histograms of one window (a phase or the run).
type hists struct {
	send, e2e *hdr.Histogram
}

func newHists() hists { return hists{send: newHDR(), e2e: newHDR()} }

func (h hists) merge(o hists) {
	h.send.Merge(o.send)
	h.e2e.Merge(o.e2e)
}

// spare buffers for Drain, so sampling allocates nothing in steady state.
var hdrPool = sync.Pool{New: func() any { return newHDR() }}
