package metrics

import (
	"fmt"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Delta is what a recorder counted since the previous delta was taken: the
// form in which a worker process ships a workload's figures to the process
// that merges them. Histograms travel in HdrHistogram's compressed V2
// encoding, so percentiles merge exactly, never averaged.
type Delta struct {
	Counters Counters
	// Send and E2E are encoded histograms of the latencies recorded since
	// the previous delta; nil when nothing was recorded.
	Send, E2E []byte
	// First and Last are the unix nanos of the first and last message the
	// recorder timed (0: none yet), on the clock of the process that took
	// the delta.
	First, Last int64
	// AckSpan and RecvSpan time the acks and receipts of this delta.
	AckSpan, RecvSpan Span `json:",omitempty"`
	// LastLatency is the end-to-end latency of the last received message,
	// in nanoseconds.
	LastLatency int64
	// Events are the connection events recorded since the previous delta,
	// on the clock of the process that took it.
	Events []ConnEvent `json:",omitempty"`
	// Outages are what the sender's outages counted since the previous
	// delta (their sends by intended time).
	Outages []OutageTally `json:",omitempty"`
}

// TakeDelta returns what was counted since prev and moves prev on. The
// recorder's histograms are drained: a recorder that ships deltas must not
// also feed a Collector.
func (r *Recorder) TakeDelta(prev *Counters) (Delta, error) {
	cur, h := r.snapshot()
	defer hdrPool.Put(h.send)
	defer hdrPool.Put(h.e2e)
	d := Delta{Counters: cur.Sub(*prev), First: r.firstNanos.Load(), Last: r.lastNanos.Load(), LastLatency: r.lastLatency.Load(), Events: r.takeEvents(), Outages: r.takeTallies()}
	*prev = cur
	d.AckSpan, d.RecvSpan = r.takeSpans()
	var err error
	if d.Send, err = encodeDelta(h.send); err != nil {
		return d, err
	}
	d.E2E, err = encodeDelta(h.e2e)
	return d, err
}

func encodeDelta(got *hdr.Histogram) ([]byte, error) {
	if got.TotalCount() == 0 {
		return nil, nil
	}
	return encodeV2(got), nil
}

// ApplyDelta adds a delta taken elsewhere to this recorder; offset is what
// to subtract from the delta's timestamps to put them on this process's
// clock.
func (r *Recorder) ApplyDelta(d Delta, offset int64) error {
	c := d.Counters
	// A delta is counted at one instant like a message (see cut).
	r.cut.RLock()
	defer r.cut.RUnlock()
	r.sent.Add(c.Sent)
	r.acked.Add(c.Acked)
	r.failed.Add(c.Failed)
	r.received.Add(c.Received)
	r.distinct.Add(c.Distinct)
	r.untracked.Add(c.Untracked)
	r.bytesAcked.Add(c.BytesAcked)
	r.bytesReceived.Add(c.BytesReceived)
	r.duplicates.Add(c.Duplicates)
	r.reordered.Add(c.Reordered)
	// Replayed events count the event counters themselves.
	r.outDelayed.Add(c.OutageDelayed)
	r.outFailed.Add(c.OutageFailed)
	for _, e := range d.Events {
		e.At -= offset
		r.event(e, false)
	}
	r.ackSpan.add(d.AckSpan.Shift(offset))
	r.recvSpan.add(d.RecvSpan.Shift(offset))
	r.addTallies(d.Outages, offset)
	if d.First != 0 {
		first := d.First - offset
		for {
			cur := r.firstNanos.Load()
			if (cur != 0 && cur <= first) || r.firstNanos.CompareAndSwap(cur, first) {
				break
			}
		}
		last := d.Last - offset
		for {
			cur := r.lastNanos.Load()
			if cur >= last || r.lastNanos.CompareAndSwap(cur, last) {
				break
			}
		}
	}
	if c.Received > 0 {
		r.lastLatency.Store(d.LastLatency)
	}
	if err := r.SendLatency.mergeEncoded(d.Send); err != nil {
		return err
	}
	return r.EndToEnd.mergeEncoded(d.E2E)
}

// mergeEncoded adds an encoded histogram's counts.
func (h *Histogram) mergeEncoded(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	// Decoded sparse: a dense histogram per delta would allocate and walk
	// every bucket, and a conductor merges a delta per worker and workload
	// every interval.
	o, err := hdr.DecodePacked(b)
	if err != nil {
		return fmt.Errorf("decoding a latency histogram: %w", err)
	}
	h.mu.Lock()
	o.MergeInto(h.cur)
	h.mu.Unlock()
	return nil
}

// GaugeValues reads the driver's gauges, if any.
func (r *Recorder) GaugeValues() map[string]float64 { return r.gaugeValues() }
