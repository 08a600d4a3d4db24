package metrics

import (
	"encoding/json"
	"io"
	"sort"
	"sync"
	"time"
)

// Backlog is what a consumer group still has to read: messages acked to its
// topic by this run's producers minus the distinct ones the group received.
type Backlog struct {
	Messages int64 `json:"messages" expr:"messages"`
	Bytes    int64 `json:"bytes" expr:"bytes"`
}

// Stats is one workload's figures over a window: the run so far (live) or a
// phase. Rates are messages/s, throughput MB/s (10^6 bytes), latency ms.
type Stats struct {
	Running       bool               `json:"running" expr:"running"`
	Sent          int64              `json:"sent" expr:"sent"`
	Acked         int64              `json:"acked" expr:"acked"`
	Failed        int64              `json:"failed" expr:"failed"`
	Received      int64              `json:"received" expr:"received"`
	Distinct      int64              `json:"distinct" expr:"distinct"`
	Untracked     int64              `json:"untracked" expr:"untracked"`
	BytesAcked    int64              `json:"bytes_acked" expr:"bytes_acked"`
	BytesReceived int64              `json:"bytes_received" expr:"bytes_received"`
	Duplicates    int64              `json:"duplicates" expr:"duplicates"`
	Reordered     int64              `json:"reordered" expr:"reordered"`
	Lost          int64              `json:"lost" expr:"lost"`
	InFlight      int64              `json:"in_flight" expr:"in_flight"`
	Rate          float64            `json:"rate" expr:"rate"`
	SendRate      float64            `json:"send_rate" expr:"send_rate"`
	RecvRate      float64            `json:"recv_rate" expr:"recv_rate"`
	SendMBps      float64            `json:"send_mbps" expr:"send_mbps"`
	RecvMBps      float64            `json:"recv_mbps" expr:"recv_mbps"`
	MaxSendRate   float64            `json:"max_send_rate" expr:"max_send_rate"`
	MaxRecvRate   float64            `json:"max_recv_rate" expr:"max_recv_rate"`
	MaxRate       float64            `json:"max_rate" expr:"max_rate"`
	Latency       Latency            `json:"latency" expr:"latency"`
	E2E           Latency            `json:"e2e" expr:"e2e"`
	LastLatency   float64            `json:"last_latency_ms" expr:"last_latency"`
	FirstAt       float64            `json:"first_at_s" expr:"first_at"`
	LastAt        float64            `json:"last_at_s" expr:"last_at"`
	Duration      float64            `json:"duration_s" expr:"duration"`
	Backlog       Backlog            `json:"backlog" expr:"backlog"`
	Lag           int64              `json:"lag" expr:"lag"`
	LagAge        float64            `json:"lag_age_s" expr:"lag_age"` // how old the lag was at the window's end, s
	Gauges        map[string]float64 `json:"gauges,omitempty" expr:"gauges"`
	// Events counts connection events; Outage sums up the time some of
	// the workload's connections were down.
	Events EventStats  `json:"events" expr:"events"`
	Outage OutageStats `json:"outage" expr:"outage"`
}

// Point is one per-second sample of a workload. The points of a phase
// cover it exactly, one after another from its start: each is a second
// long, but for the last, which also takes the phase's remaining fraction
// of a second (1 to 2 s), and the only one of a phase shorter than a
// second. Their counts add up to the phase's.
type Point struct {
	T        float64            `json:"t"`          // seconds since the run started
	Interval float64            `json:"interval_s"` // seconds the rates cover
	Phase    string             `json:"phase"`
	SendRate float64            `json:"send_rate"`
	RecvRate float64            `json:"recv_rate"`
	SendMBps float64            `json:"send_mbps"`
	RecvMBps float64            `json:"recv_mbps"`
	P99      float64            `json:"p99_ms"`
	E2EP99   float64            `json:"e2e_p99_ms"`
	Backlog  Backlog            `json:"backlog"`
	Lag      int64              `json:"lag"`
	Gauges   map[string]float64 `json:"gauges,omitempty"`
	// Counts of the interval, what its rates are made of, and when the
	// lag was measured (seconds since the start).
	Sent          int64   `json:"sent"`
	Acked         int64   `json:"acked"`
	Failed        int64   `json:"failed"`
	Received      int64   `json:"received"`
	BytesAcked    int64   `json:"bytes_acked"`
	BytesReceived int64   `json:"bytes_received"`
	LagAt         float64 `json:"lag_at_s,omitempty"`
}

// Phase is a named window of a run.
type Phase struct {
	Name      string           `json:"name"`
	Start     float64          `json:"start_s"`
	End       float64          `json:"end_s"`
	Workloads map[string]Stats `json:"workloads"`
	Extra     map[string]Gauge `json:"extra,omitempty"`
}

// Duration is the phase's length in seconds.
func (p Phase) Duration() float64 { return p.End - p.Start }

// Gauge summarizes an extra figure (a host or broker metric) over a window.
type Gauge struct {
	Avg  float64 `json:"avg" expr:"avg"`
	Max  float64 `json:"max" expr:"max"`
	Last float64 `json:"last" expr:"last"`
	n    int
}

func (g *Gauge) add(v float64) {
	if g.n == 0 || v > g.Max {
		g.Max = v
	}
	g.Avg += (v - g.Avg) / float64(g.n+1)
	g.n++
	g.Last = v
}

// ExtraSampler supplies figures that are not workload counters (host CPU,
// scraped broker metrics), sampled with the workloads every second.
type ExtraSampler interface {
	Sample() map[string]float64
}

type track struct {
	rec        *Recorder
	prev       Counters
	prevAt     time.Time
	sendRate   float64
	recvRate   float64
	sendMBps   float64
	recvMBps   float64
	run, phase hists
	phaseStart Counters
	// last are the counters at the latest point: the cut that closes a
	// phase and opens the next.
	last      Counters
	phaseSpan [2]Span // acks, receipts of the phase
	phasePts  int     // points of the phase in series
	phaseMax  peaks
	runMax    peaks
	series    []Point
	// The driver gauges of the last point taken while the workload ran
	// (not being stopped), in the phase and in the run.
	phaseGauges, runGauges map[string]float64
	phaseLive, runLive     bool
}

// Collector samples recorders every second into series, phases and run totals.
type Collector struct {
	mu      sync.Mutex
	start   time.Time
	tracks  []*track
	byName  map[string]*track
	phases  []Phase
	cur     Phase
	opening bool // cur is the opening phase
	curAt   time.Time
	extras  []ExtraSampler
	extra   map[string]float64
	runExt  map[string]*Gauge
	phExt   map[string]*Gauge
	extraTS []ExtraPoint
	// sampledAt is when the last sample was taken (or the phase began):
	// samples follow every second from a phase's start (see Tick).
	sampledAt time.Time
	sink      *json.Encoder
	label     string
	// header opens the sink's lines of this run (see series.go).
	header     *SeriesHeader
	headerDone bool
}

// SetSink makes every sample also go to w as JSON lines, tagged with the
// run's label.
func (c *Collector) SetSink(w io.Writer, label string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w != nil {
		c.sink = json.NewEncoder(w)
		for _, t := range c.tracks {
			t.rec.keepEventsForFile()
		}
	}
	c.label = label
}

// ExtraPoint is one per-second sample of the extra figures.
type ExtraPoint struct {
	T      float64            `json:"t"`
	Values map[string]float64 `json:"values"`
}

// OpeningPhase names the phase a run opens with: what steps before the
// first one that names a phase measure.
const OpeningPhase = "start"

// PhaseLabel is how reports name a phase: a result saved before the
// opening phase had a name has it unnamed.
func PhaseLabel(name string) string {
	if name == "" {
		return OpeningPhase
	}
	return name
}

// keepPhase says whether a closed phase is kept: a phase the plan named,
// or one in which something happened. The opening phase (and the trailing
// one Finish opens) is dropped when nothing happened in it.
func keepPhase(p Phase, opening bool) bool {
	return (p.Name != "" && !opening) || hasActivity(p)
}

// NewCollector starts a run's collection at now with the opening phase.
func NewCollector(now time.Time) *Collector {
	c := &Collector{start: now, byName: map[string]*track{}, runExt: map[string]*Gauge{}, phExt: map[string]*Gauge{}}
	c.cur = Phase{Name: OpeningPhase, Start: 0}
	c.opening = true
	c.curAt, c.sampledAt = now, now
	return c
}

// Start is when the run started.
func (c *Collector) Start() time.Time { return c.start }

// Add registers a workload's recorder.
func (c *Collector) Add(r *Recorder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &track{rec: r, prev: r.Counters(), prevAt: c.start, run: newHists(), phase: newHists()}
	t.phaseStart, t.last = t.prev, t.prev
	r.setPhase(c.cur.Name)
	if c.sink != nil {
		r.keepEventsForFile()
	}
	c.tracks = append(c.tracks, t)
	c.byName[r.Name] = t
}

// AddExtra registers a sampler of extra figures.
func (c *Collector) AddExtra(s ExtraSampler) {
	c.mu.Lock()
	c.extras = append(c.extras, s)
	c.mu.Unlock()
}

// Sample takes one per-second sample. The run calls it from one goroutine.
func (c *Collector) Sample(now time.Time) {
	var extra map[string]float64
	if len(c.extras) > 0 {
		extra = map[string]float64{}
		for _, s := range c.extras {
			for k, v := range s.Sample() {
				extra[k] = v
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sampleLocked(now, extra, false)
}

// NextSample is when the next per-second sample is due: a second after
// the previous one, or after the current phase began. Sampling on a grid
// that restarts at every phase makes every point of a phase a whole second
// of it, but for its remaining fraction, which joins its last point.
func (c *Collector) NextSample() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sampledAt.Add(time.Second)
}

// Tick takes the per-second sample if it is due at now (see NextSample)
// and reports whether it did: a timer set before a phase change may fire
// before the new phase's first second is over.
func (c *Collector) Tick(now time.Time) bool {
	if now.Before(c.NextSample()) {
		return false
	}
	c.Sample(now)
	return true
}

// sampleLocked takes a sample of every workload; at a phase's end (last)
// what it measured joins the phase's last point.
func (c *Collector) sampleLocked(now time.Time, extra map[string]float64, last bool) {
	c.writeHeaderLocked()
	c.sampledAt = now
	ts := now.Sub(c.start).Seconds()
	for _, t := range c.tracks {
		// One snapshot of the recorder serves the point, the phase and the
		// run: nothing counted falls between two reads.
		cur, iv := t.rec.snapshot()
		acks, recvs := t.rec.takeSpans()
		t.phaseSpan[0].Add(acks)
		t.phaseSpan[1].Add(recvs)
		dt := now.Sub(t.prevAt).Seconds()
		t.phase.merge(iv)
		t.run.merge(iv)
		p := Point{T: ts, Phase: c.cur.Name, P99: Summarize(iv.send).P99, E2EP99: Summarize(iv.e2e).P99,
			Backlog: t.rec.backlogValue(), Lag: t.rec.lag.Load(), Gauges: t.rec.gaugeValues()}
		if at := t.rec.lagAt.Load(); at != 0 {
			p.LagAt = time.Unix(0, at).Sub(c.start).Seconds()
		}
		// Read after the gauges: a stop under way when they were read
		// shows here.
		running, stopping := t.rec.running.Load(), t.rec.stopping.Load()
		p.setCounts(cur.Sub(t.prev), dt)
		raw, emit, joins := p, true, false
		switch {
		case (last || dt < 0.05) && t.phasePts > 0:
			// The phase's remaining fraction of a second (or a sample right
			// after another) joins its last point: it must neither pass for
			// a peak nor show as a second of its own.
			prev := &t.series[len(t.series)-1]
			prev.add(p)
			p, joins = *prev, true
		case dt <= 0 && p.counts() == (Counters{}):
			// No time has passed and no message was counted: no point.
			emit = false
		default:
			t.series = appendBounded(t.series, p)
			t.phasePts++
		}
		if emit {
			if running && !stopping {
				t.phaseGauges, t.phaseLive = raw.Gauges, true
				t.runGauges, t.runLive = raw.Gauges, true
			}
			t.sendRate, t.recvRate, t.sendMBps, t.recvMBps = p.SendRate, p.RecvRate, p.SendMBps, p.RecvMBps
			t.phaseMax.see(p)
			t.runMax.see(p)
			t.prev, t.prevAt = cur, now
		}
		t.last = t.prev
		if c.sink != nil {
			// A sample that makes no point still writes what it measured.
			line := SeriesLine{Run: c.label, Workload: t.rec.Name, Point: Point{T: ts, Phase: c.cur.Name}, State: c.stateLocked(t, cur, iv, acks, recvs, running, stopping)}
			if emit {
				// The file keeps the interval's own point; reading it joins
				// it to the previous one as here.
				line.Point, line.Joins = raw, joins
			}
			_ = c.sink.Encode(line)
		}
		hdrPool.Put(iv.send)
		hdrPool.Put(iv.e2e)
	}
	if extra != nil {
		c.extra = extra
		c.extraTS = appendBoundedExtra(c.extraTS, ExtraPoint{T: ts, Values: extra})
		if c.sink != nil {
			_ = c.sink.Encode(SeriesLine{Run: c.label, Point: Point{T: ts, Phase: c.cur.Name}, Extra: extra})
		}
		addGauges(extra, c.runExt, c.phExt)
	}
}

// addGauges adds each extra figure's sample to its gauge in every window.
func addGauges(extra map[string]float64, windows ...map[string]*Gauge) {
	for k, v := range extra {
		for _, m := range windows {
			g := m[k]
			if g == nil {
				g = &Gauge{}
				m[k] = g
			}
			g.add(v)
		}
	}
}

// StartPhase closes the current phase (sampling up to now) and opens name.
// One snapshot of each recorder closes the one and opens the other, so
// every message and every latency belongs to exactly one phase. A first
// phase in which nothing happened is dropped.
func (c *Collector) StartPhase(name string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sampleLocked(now, nil, true)
	closed := c.closePhaseLocked(now, true)
	if keepPhase(closed, c.opening) {
		c.phases = append(c.phases, closed)
	}
	c.opening = false
	c.cur = Phase{Name: name, Start: now.Sub(c.start).Seconds()}
	c.curAt, c.sampledAt = now, now
	if c.sink != nil && c.headerDone {
		_ = c.sink.Encode(SeriesLine{Run: c.label, Point: Point{T: c.cur.Start}, Begins: &name})
	}
	for _, t := range c.tracks {
		t.rec.setPhase(name)
		t.phase = newHists()
		// The phase begins where the last point ended, so that its
		// points add up to it.
		t.phaseStart = t.last
		t.phaseSpan, t.phasePts, t.phaseMax = [2]Span{}, 0, peaks{}
		t.phaseGauges, t.phaseLive = nil, false
	}
	c.phExt = map[string]*Gauge{}
}

func hasActivity(p Phase) bool {
	for _, s := range p.Workloads {
		if s.Acked+s.Received+s.Failed > 0 {
			return true
		}
	}
	return false
}

// closePhaseLocked returns the current phase's stats as of now: as of the
// latest point when atCut, else with the counters read now (a live view).
func (c *Collector) closePhaseLocked(now time.Time, atCut bool) Phase {
	p := c.cur
	p.End = now.Sub(c.start).Seconds()
	p.Workloads = map[string]Stats{}
	dur := now.Sub(c.curAt).Seconds()
	for _, t := range c.tracks {
		cur := t.last
		spans := t.phaseSpan
		if !atCut {
			cur = t.rec.Counters()
			spans[0].Add(t.rec.ackSpan.peek())
			spans[1].Add(t.rec.recvSpan.peek())
		}
		d := cur.Sub(t.phaseStart)
		s := c.statsLocked(t, d, t.phase, now)
		if atCut && t.phaseLive {
			s.Gauges = t.phaseGauges
		}
		s.windowRates(d, dur, spans)
		t.phaseMax.set(&s)
		if dur < 1 {
			// A phase shorter than a second has no per-second maximum.
			s.MaxSendRate, s.MaxRecvRate = NA, NA
		}
		s.FillRate(t.rec.Role)
		s.Outage = outageStats(t.rec.outageList(c.start, now), p.Start, p.End, d)
		p.Workloads[t.rec.Name] = s
	}
	p.Extra = gaugeCopy(c.phExt)
	return p
}

func gaugeCopy(m map[string]*Gauge) map[string]Gauge {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]Gauge, len(m))
	for k, g := range m {
		out[k] = *g
	}
	return out
}

// statsLocked fills the fields common to live and phase stats, for a
// window that ends at end.
func (c *Collector) statsLocked(t *track, d Counters, h hists, end time.Time) Stats {
	r := t.rec
	s := Stats{
		Running: r.running.Load(), Sent: d.Sent, Acked: d.Acked, Failed: d.Failed,
		Received: d.Received, Distinct: d.Distinct, Untracked: d.Untracked, BytesAcked: d.BytesAcked, BytesReceived: d.BytesReceived,
		Duplicates: d.Duplicates, Reordered: d.Reordered,
		Latency: Summarize(h.send).orNA(d.Acked), E2E: Summarize(h.e2e).orNA(d.Received - d.Untracked),
		LastLatency: float64(r.lastLatency.Load()) / 1e6,
		Backlog:     r.backlogValue(), Lag: r.lag.Load(), Lost: r.lostValue(), Gauges: r.gaugeValues(),
		Events: EventStats{Disconnects: d.Disconnects, Reconnects: d.Reconnects, SendErrors: d.SendErrors,
			ReceiveErrors: d.ReceiveErrors, Rebalances: d.Rebalances},
	}
	s.LagAge = NA
	if at := r.lagAt.Load(); at != 0 {
		s.LagAge = max(0, end.Sub(time.Unix(0, at)).Seconds())
	}
	s.InFlight = max(0, s.Backlog.Messages-s.Lost)
	if f := r.firstNanos.Load(); f != 0 {
		s.FirstAt = time.Unix(0, f).Sub(c.start).Seconds()
		s.LastAt = time.Unix(0, r.lastNanos.Load()).Sub(c.start).Seconds()
		s.Duration = s.LastAt - s.FirstAt
	}
	return s
}

// setRates sets the send and receive rates of d over dur seconds (zero
// when dur is not positive).
func (s *Stats) setRates(d Counters, dur float64) {
	s.SendRate, s.RecvRate, s.SendMBps, s.RecvMBps = 0, 0, 0, 0
	if dur > 0 {
		s.SendRate = float64(d.Acked) / dur
		s.RecvRate = float64(d.Received) / dur
		s.SendMBps = float64(d.BytesAcked) / dur / 1e6
		s.RecvMBps = float64(d.BytesReceived) / dur / 1e6
	}
}

// FillRate sets rate to what the workload is for: sends for workloads that
// only send, receipts otherwise.
func (s *Stats) FillRate(role Role) {
	if role.Produces() {
		s.Rate, s.MaxRate = s.SendRate, s.MaxSendRate
	} else {
		s.Rate, s.MaxRate = s.RecvRate, s.MaxRecvRate
	}
}

// Snapshot is everything measured so far, read at one instant: what
// expressions evaluate against and what reports are made from.
type Snapshot struct {
	Elapsed     float64            `json:"elapsed_s"`
	Phase       Phase              `json:"current_phase"`
	Phases      []Phase            `json:"phases"`
	Workloads   map[string]Stats   `json:"workloads"`
	Order       []string           `json:"order"`
	Extra       map[string]float64 `json:"extra,omitempty"`
	ExtraRun    map[string]Gauge   `json:"extra_run,omitempty"`
	Series      map[string][]Point `json:"series,omitempty"`
	ExtraSeries []ExtraPoint       `json:"extra_series,omitempty"`
	// Events are the workloads' connection events counted per second, in
	// time order; Outages the stretches with connections down.
	Events  []EventCount `json:"events,omitempty"`
	Outages []Outage     `json:"outages,omitempty"`
}

// Snapshot reads the live figures: counts since the run started, rates of
// the last sample, latency over the run. withSeries copies the series too.
func (c *Collector) Snapshot(now time.Time, withSeries bool) Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked(now, withSeries, false)
}

// snapshotLocked is Snapshot; atCut takes the counts as of the latest
// sample, as the histograms are, rather than as of now.
func (c *Collector) snapshotLocked(now time.Time, withSeries, atCut bool) Snapshot {
	s := Snapshot{Elapsed: now.Sub(c.start).Seconds(), Workloads: map[string]Stats{}}
	for _, t := range c.tracks {
		cur := t.last
		if !atCut {
			cur = t.rec.Counters()
		}
		st := c.statsLocked(t, cur, t.run, now)
		if atCut && t.runLive {
			st.Gauges = t.runGauges
		}
		st.SendRate, st.RecvRate, st.SendMBps, st.RecvMBps = t.sendRate, t.recvRate, t.sendMBps, t.recvMBps
		t.runMax.set(&st)
		st.FillRate(t.rec.Role)
		outs := t.rec.outageList(c.start, now)
		st.Outage = outageStats(outs, 0, s.Elapsed, cur)
		s.Workloads[t.rec.Name] = st
		s.Order = append(s.Order, t.rec.Name)
		s.Outages = append(s.Outages, outs...)
		s.Events = append(s.Events, t.rec.eventCounts(c.start)...)
		if withSeries {
			if s.Series == nil {
				s.Series = map[string][]Point{}
			}
			s.Series[t.rec.Name] = append([]Point(nil), t.series...)
		}
	}
	sort.SliceStable(s.Events, func(i, j int) bool { return s.Events[i].T < s.Events[j].T })
	sort.SliceStable(s.Outages, func(i, j int) bool { return s.Outages[i].Start < s.Outages[j].Start })
	s.Phases = append([]Phase(nil), c.phases...)
	s.Phase = c.closePhaseLocked(now, atCut)
	if c.extra != nil {
		s.Extra = make(map[string]float64, len(c.extra))
		for k, v := range c.extra {
			s.Extra[k] = v
		}
	}
	s.ExtraRun = gaugeCopy(c.runExt)
	if withSeries {
		s.ExtraSeries = append([]ExtraPoint(nil), c.extraTS...)
	}
	return s
}

// Finish closes the last phase and returns the final snapshot with series.
// The run's totals are those of the cut that closed the last phase, so the
// phases add up to them exactly.
func (c *Collector) Finish(now time.Time) Snapshot {
	c.StartPhase("", now)
	c.mu.Lock()
	defer c.mu.Unlock()
	// StartPhase opened an empty trailing phase: the closed list is final.
	c.cur = Phase{}
	s := c.snapshotLocked(now, true, true)
	s.Phase = Phase{}
	return s
}

// Announcements returns the progress lines of connection events since the
// previous call (see Recorder.announce), for every workload.
func (c *Collector) Announcements(now time.Time) []string {
	c.mu.Lock()
	tracks := append([]*track(nil), c.tracks...)
	c.mu.Unlock()
	var lines []string
	for _, t := range tracks {
		lines = append(lines, t.rec.announce(c.start, now)...)
	}
	return lines
}

// PhaseNames lists phase names in order, for reports.
func (s Snapshot) PhaseNames() []string {
	names := make([]string, 0, len(s.Phases))
	for _, p := range s.Phases {
		names = append(names, p.Name)
	}
	return names
}

// SortedExtra lists the extra figure names, sorted.
func (s Snapshot) SortedExtra() []string {
	keys := make([]string, 0, len(s.ExtraRun))
	for k := range s.ExtraRun {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Window sums up each workload's samples taken after since (seconds since
// the start): what the progress lines print.
type Window struct {
	SendRate, RecvRate float64
	SendMBps, RecvMBps float64
	P99, E2EP99        float64 // highest per-second p99 in the window
	Samples            int     // per-second samples in the window
}

// Windows returns each workload's window since the given time.
func (c *Collector) Windows(since float64) map[string]Window {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]Window{}
	for _, t := range c.tracks {
		var w Window
		n := 0
		for i := len(t.series) - 1; i >= 0 && t.series[i].T > since; i-- {
			p := t.series[i]
			w.SendRate += p.SendRate
			w.RecvRate += p.RecvRate
			w.SendMBps += p.SendMBps
			w.RecvMBps += p.RecvMBps
			w.P99 = max(w.P99, p.P99)
			w.E2EP99 = max(w.E2EP99, p.E2EP99)
			n++
		}
		w.Samples = n
		if n > 0 {
			w.SendRate /= float64(n)
			w.RecvRate /= float64(n)
			w.SendMBps /= float64(n)
			w.RecvMBps /= float64(n)
		}
		out[t.rec.Name] = w
	}
	return out
}
