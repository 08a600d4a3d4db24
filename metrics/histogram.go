// Package metrics holds what planrun measures: counters, HDR latency
// histograms, per-second series and per-phase windows.
package metrics

import (
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds from 1µs to 1 hour with 3
// significant digits: HDR histograms merge exactly across threads and phases.
const (
	minMicros = 1
	maxMicros = int64(time.Hour / time.Microsecond)
	sigFigs   = 3
)

func newHDR() *hdr.Histogram { return hdr.New(minMicros, maxMicros, sigFigs) }

// Histogram is a concurrency-safe HDR histogram that is drained once per
// interval: Record costs one uncontended lock and no allocation.
type Histogram struct {
	mu  sync.Mutex
	cur *hdr.Histogram
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram { return &Histogram{cur: newHDR()} }

// Record adds one latency; values beyond an hour are clamped, not dropped,
// so a stalled broker still counts.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d / time.Microsecond)
	if v < minMicros {
		v = minMicros
	} else if v > maxMicros {
		v = maxMicros
	}
	h.mu.Lock()
	_ = h.cur.RecordValue(v)
	h.mu.Unlock()
}

// Drain returns what was recorded since the last Drain into dst (which is
// reset first) by swapping buffers, so recording never waits for a merge.
func (h *Histogram) Drain(dst *hdr.Histogram) *hdr.Histogram {
	dst.Reset()
	h.mu.Lock()
	out := h.cur
	h.cur = dst
	h.mu.Unlock()
	return out
}

// Latency is a histogram summary in milliseconds, the unit reports and
// expressions use.
type Latency struct {
	Count int64   `json:"count" expr:"count"`
	Avg   float64 `json:"avg_ms" expr:"avg"`
	Min   float64 `json:"min_ms" expr:"min"`
	P50   float64 `json:"p50_ms" expr:"p50"`
	P90   float64 `json:"p90_ms" expr:"p90"`
	P95   float64 `json:"p95_ms" expr:"p95"`
	P99   float64 `json:"p99_ms" expr:"p99"`
	P999  float64 `json:"p999_ms" expr:"p999"`
	Max   float64 `json:"max_ms" expr:"max"`
}

// Summarize reads the percentiles of h.
func Summarize(h *hdr.Histogram) Latency {
	if h == nil || h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		Count: h.TotalCount(),
		Avg:   h.Mean() / 1000,
		Min:   ms(h.Min()),
		P50:   ms(h.ValueAtQuantile(50)),
		P90:   ms(h.ValueAtQuantile(90)),
		P95:   ms(h.ValueAtQuantile(95)),
		P99:   ms(h.ValueAtQuantile(99)),
		P999:  ms(h.ValueAtQuantile(99.9)),
		Max:   ms(h.Max()),
	}
}
