package metrics

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// The series file is written line by line while a run goes on, so that a
// run killed without warning (SIGKILL, a lost machine) still leaves what it
// measured: a header line when the first sample is taken, then every
// second one line per workload (its per-second point, its counters so far
// and the latency histograms of that second) and one of extra figures, and
// a line at each phase change. ReadSeries makes the snapshot of each run
// from it, as the run would have ended at its last line.

// SeriesLine is one line of the series file.
type SeriesLine struct {
	Run      string `json:"run,omitempty"`
	Workload string `json:"workload,omitempty"`
	Point
	Extra map[string]float64 `json:"extra,omitempty"`
	// Header opens a run; Begins marks the start of phase *Begins at T.
	Header *SeriesHeader `json:"header,omitempty"`
	Begins *string       `json:"begins,omitempty"`
	// State is the workload's figures at T. A line written by a phase
	// change right after a sample carries a state but no point (interval 0).
	State *SeriesState `json:"state,omitempty"`
	// Joins says the line's point, a phase's last fraction of a second,
	// joins the workload's previous point (see Point) in reports.
	Joins bool `json:"joins,omitempty"`
}

// SeriesHeader says which run the lines that follow belong to.
type SeriesHeader struct {
	// Result is what the run's result file would say about the plan and
	// where it ran (results.Result without its runs).
	Result  json.RawMessage   `json:"result,omitempty"`
	Index   int               `json:"index"`
	Label   string            `json:"label,omitempty"`
	Started time.Time         `json:"started"`
	Order   []string          `json:"order"`
	Kinds   map[string]string `json:"kinds"`
	Roles   map[string]Role   `json:"roles"`
}

// SeriesState is a workload's counters since the run started and what
// it measured since the previous line.
type SeriesState struct {
	Counters
	Running bool `json:"running,omitempty"`
	// Stopping: the plan is stopping the workload (its gauges are no
	// longer what it ran with).
	Stopping    bool    `json:"stopping,omitempty"`
	Lost        int64   `json:"lost,omitempty"`
	LastLatency float64 `json:"last_latency_ms,omitempty"`
	FirstAt     float64 `json:"first_at_s,omitempty"`
	LastAt      float64 `json:"last_at_s,omitempty"`
	// Send and E2E are the latency histograms of the interval, HDR
	// compressed and base64 encoded; empty when nothing was recorded.
	Send string `json:"send_hist,omitempty"`
	E2E  string `json:"e2e_hist,omitempty"`
	// Events are the connection events recorded since the previous line;
	// Outages what every outage has counted so far.
	Events  []ConnEvent   `json:"events,omitempty"`
	Outages []OutageTally `json:"outages,omitempty"`
	// AckSpan and RecvSpan time the acks and receipts since the previous
	// line (unix nanos): a short phase's rates run over them.
	AckSpan  *Span `json:"ack_span,omitempty"`
	RecvSpan *Span `json:"recv_span,omitempty"`
}

// SetSeriesHeader gives the header the sink's first line carries; the
// workloads' kinds and roles are added when it is written.
func (c *Collector) SetSeriesHeader(h SeriesHeader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.Started = c.start
	c.header = &h
}

// writeHeaderLocked writes the header once, before the first sample.
func (c *Collector) writeHeaderLocked() {
	if c.sink == nil || c.header == nil || c.headerDone {
		return
	}
	c.headerDone = true
	h := *c.header
	h.Kinds, h.Roles = map[string]string{}, map[string]Role{}
	for _, t := range c.tracks {
		h.Order = append(h.Order, t.rec.Name)
		h.Kinds[t.rec.Name] = t.rec.Kind
		h.Roles[t.rec.Name] = t.rec.Role
	}
	_ = c.sink.Encode(SeriesLine{Run: c.label, Header: &h})
}

func encodeHist(h *hdr.Histogram) string {
	if h.TotalCount() == 0 {
		return ""
	}
	return string(encodeV2(h))
}

// stateLocked is what a workload's line carries besides its point.
func (c *Collector) stateLocked(t *track, cur Counters, iv hists, acks, recvs Span, running, stopping bool) *SeriesState {
	r := t.rec
	s := &SeriesState{Counters: cur, Running: running, Stopping: stopping, Lost: r.lostValue(),
		LastLatency: float64(r.lastLatency.Load()) / 1e6, Send: encodeHist(iv.send), E2E: encodeHist(iv.e2e),
		Events: r.takeFileEvents(), Outages: r.tallies()}
	if acks.First != 0 {
		s.AckSpan = &acks
	}
	if recvs.First != 0 {
		s.RecvSpan = &recvs
	}
	if f := r.firstNanos.Load(); f != 0 {
		s.FirstAt = time.Unix(0, f).Sub(c.start).Seconds()
		s.LastAt = time.Unix(0, r.lastNanos.Load()).Sub(c.start).Seconds()
	}
	return s
}

// SeriesRun is one run read back from a series file.
type SeriesRun struct {
	Header SeriesHeader
	// Metrics are the figures up to the run's last line, as a run's final
	// snapshot: phases, run totals, latency percentiles, series.
	Metrics Snapshot
	// Ended is the time of the last line, in seconds since the start.
	Ended float64
}

// replay rebuilds one run's figures from its lines.
type replay struct {
	run       SeriesRun
	phases    []Phase
	cur       Phase
	curOpen   bool
	opening   bool // cur is the opening phase
	works     map[string]*replayTrack
	extraRun  map[string]*Gauge
	extraPh   map[string]*Gauge
	lastExtra map[string]float64
}

type replayTrack struct {
	name string
	role Role
	last SeriesState
	// pointEnd are the counters where the last point ended: where the
	// next phase begins.
	pointEnd   Counters
	lastPoint  Point
	phaseStart Counters
	phaseMax   peaks
	runMax     peaks
	spans      [2]Span // acks, receipts of the phase
	run, phase hists
	series     []Point
	// The driver gauges of the last point taken while the workload ran,
	// as the collector keeps them.
	phaseGauges, runGauges map[string]float64
	phaseLive, runLive     bool
	// rec replays the connection events, which make up the outages.
	rec *Recorder
}

// ReadSeries reads a series file's runs. Lines cut short by a kill (the
// last one, typically) are skipped.
func ReadSeries(r io.Reader) ([]SeriesRun, error) {
	var runs []*replay
	var cur *replay
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		var l SeriesLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue // a line the kill cut short
		}
		switch {
		case l.Header != nil:
			cur = newReplay(*l.Header)
			runs = append(runs, cur)
		case cur == nil:
			return nil, fmt.Errorf("line %d: a sample before any run header (a series file written by an older planrun has none)", n)
		default:
			if err := cur.line(l); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, errors.New("no run in the series file (was the run killed before its first sample?)")
	}
	out := make([]SeriesRun, len(runs))
	for i, rp := range runs {
		out[i] = rp.finish()
	}
	return out, nil
}

func newReplay(h SeriesHeader) *replay {
	rp := &replay{run: SeriesRun{Header: h}, works: map[string]*replayTrack{}, extraRun: map[string]*Gauge{}, extraPh: map[string]*Gauge{}}
	for _, name := range h.Order {
		rp.works[name] = &replayTrack{name: name, role: h.Roles[name], run: newHists(), phase: newHists(),
			rec: NewRecorder(name, h.Kinds[name], h.Roles[name])}
	}
	rp.cur = Phase{Name: OpeningPhase}
	rp.curOpen, rp.opening = true, true
	for _, t := range rp.works {
		t.rec.setPhase(OpeningPhase)
	}
	return rp
}

func decodeHist(s string) (*hdr.Histogram, error) {
	if s == "" {
		return newHDR(), nil
	}
	return hdr.Decode([]byte(s))
}

func (rp *replay) line(l SeriesLine) error {
	rp.run.Ended = max(rp.run.Ended, l.T)
	switch {
	case l.Begins != nil:
		rp.closePhase(l.T)
		rp.cur = Phase{Name: *l.Begins, Start: l.T}
		rp.curOpen = true
		for _, t := range rp.works {
			t.rec.setPhase(*l.Begins)
			t.phaseStart = t.pointEnd
			t.phase = newHists()
			t.phaseMax, t.spans = peaks{}, [2]Span{}
			t.phaseGauges, t.phaseLive = nil, false
		}
		rp.extraPh = map[string]*Gauge{}
	case l.Workload != "":
		t := rp.works[l.Workload]
		if t == nil {
			return fmt.Errorf("workload %q is not in the run's header", l.Workload)
		}
		if l.State != nil {
			var iv hists
			var err error
			if iv.send, err = decodeHist(l.State.Send); err != nil {
				return fmt.Errorf("workload %s: send latency: %w", l.Workload, err)
			}
			if iv.e2e, err = decodeHist(l.State.E2E); err != nil {
				return fmt.Errorf("workload %s: end-to-end latency: %w", l.Workload, err)
			}
			t.run.merge(iv)
			t.phase.merge(iv)
			t.events(l.State)
			if l.State.AckSpan != nil {
				t.spans[0].Add(*l.State.AckSpan)
			}
			if l.State.RecvSpan != nil {
				t.spans[1].Add(*l.State.RecvSpan)
			}
			t.last = *l.State
		}
		if l.Interval > 0 || l.counts() != (Counters{}) {
			if l.Joins && len(t.series) > 0 {
				t.series[len(t.series)-1].add(l.Point)
			} else {
				t.series = append(t.series, l.Point)
			}
			if l.State != nil && l.State.Running && !l.State.Stopping {
				t.phaseGauges, t.phaseLive = l.Point.Gauges, true
				t.runGauges, t.runLive = l.Point.Gauges, true
			}
			p := t.series[len(t.series)-1]
			t.lastPoint = p
			t.phaseMax.see(p)
			t.runMax.see(p)
			if l.State != nil {
				t.pointEnd = l.State.Counters
			}
		}
	case l.Extra != nil:
		rp.lastExtra = l.Extra
		rp.run.Metrics.ExtraSeries = append(rp.run.Metrics.ExtraSeries, ExtraPoint{T: l.T, Values: l.Extra})
		addGauges(l.Extra, rp.extraRun, rp.extraPh)
	}
	return nil
}

// events replays the connection events of a line, and what each outage
// counted as of the line.
func (t *replayTrack) events(st *SeriesState) {
	for _, e := range st.Events {
		t.rec.event(e, false)
	}
	t.rec.setTallies(st.Outages)
}

// outages are the track's outages as of end seconds into the run.
func (rp *replay) outages(t *replayTrack, end float64) []Outage {
	start := rp.run.Header.Started
	return t.rec.outageList(start, start.Add(time.Duration(end*float64(time.Second))))
}

// stats are a track's figures over counters d with histograms h in a
// window that ends at end, as the collector's statsLocked makes them.
func (t *replayTrack) stats(d Counters, h hists, end float64) Stats {
	p := t.lastPoint
	s := Stats{Running: t.last.Running, Sent: d.Sent, Acked: d.Acked, Failed: d.Failed,
		Received: d.Received, Distinct: d.Distinct, Untracked: d.Untracked, BytesAcked: d.BytesAcked, BytesReceived: d.BytesReceived,
		Duplicates: d.Duplicates, Reordered: d.Reordered, Latency: Summarize(h.send).orNA(d.Acked), E2E: Summarize(h.e2e).orNA(d.Received - d.Untracked),
		LastLatency: t.last.LastLatency, Backlog: p.Backlog, Lag: p.Lag, Lost: t.last.Lost, Gauges: p.Gauges,
		FirstAt: t.last.FirstAt, LastAt: t.last.LastAt,
		Events: EventStats{Disconnects: d.Disconnects, Reconnects: d.Reconnects, SendErrors: d.SendErrors,
			ReceiveErrors: d.ReceiveErrors, Rebalances: d.Rebalances}}
	s.InFlight = max(0, s.Backlog.Messages-s.Lost)
	if s.FirstAt != 0 || s.LastAt != 0 {
		s.Duration = s.LastAt - s.FirstAt
	}
	s.LagAge = NA
	if p.LagAt != 0 {
		s.LagAge = max(0, end-p.LagAt)
	}
	return s
}

func (rp *replay) closePhase(end float64) {
	if !rp.curOpen {
		return
	}
	p := rp.cur
	p.End = end
	p.Workloads = map[string]Stats{}
	dur := p.End - p.Start
	for name, t := range rp.works {
		d := t.pointEnd.Sub(t.phaseStart)
		s := t.stats(d, t.phase, end)
		if t.phaseLive {
			s.Gauges = t.phaseGauges
		}
		s.windowRates(d, dur, t.spans)
		t.phaseMax.set(&s)
		if dur < 1 {
			s.MaxSendRate, s.MaxRecvRate = NA, NA
		}
		s.FillRate(t.role)
		s.Outage = outageStats(rp.outages(t, end), p.Start, p.End, d)
		p.Workloads[name] = s
	}
	p.Extra = gaugeCopy(rp.extraPh)
	if keepPhase(p, rp.opening) {
		rp.phases = append(rp.phases, p)
	}
	rp.curOpen, rp.opening = false, false
}

func (rp *replay) finish() SeriesRun {
	rp.closePhase(rp.run.Ended)
	s := &rp.run.Metrics
	s.Elapsed = rp.run.Ended
	s.Phases = rp.phases
	s.Workloads = map[string]Stats{}
	s.Series = map[string][]Point{}
	s.Order = rp.run.Header.Order
	for _, name := range rp.run.Header.Order {
		t := rp.works[name]
		st := t.stats(t.last.Counters, t.run, rp.run.Ended)
		if t.runLive {
			st.Gauges = t.runGauges
		}
		t.runMax.set(&st)
		outs := rp.outages(t, rp.run.Ended)
		st.Outage = outageStats(outs, 0, rp.run.Ended, t.last.Counters)
		s.Workloads[name] = st
		s.Outages = append(s.Outages, outs...)
		s.Events = append(s.Events, t.rec.eventCounts(rp.run.Header.Started)...)
		if len(t.series) > 0 {
			s.Series[name] = t.series
		}
	}
	sort.SliceStable(s.Events, func(i, j int) bool { return s.Events[i].T < s.Events[j].T })
	sort.SliceStable(s.Outages, func(i, j int) bool { return s.Outages[i].Start < s.Outages[j].Start })
	s.FinalRates(rp.run.Header.Roles)
	s.Extra = rp.lastExtra
	s.ExtraRun = gaugeCopy(rp.extraRun)
	return rp.run
}

// FinalRates turns whole-run rates into averages over each workload's
// active time (first to last message), which is what a per-run row means:
// a finished run's figure, which does not depend on when the last sample
// was taken.
func (s *Snapshot) FinalRates(roles map[string]Role) {
	for name, st := range s.Workloads {
		st.setRates(Counters{Acked: st.Acked, Received: st.Received, BytesAcked: st.BytesAcked, BytesReceived: st.BytesReceived}, st.Duration)
		st.FillRate(roles[name])
		s.Workloads[name] = st
	}
}
