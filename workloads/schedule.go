package workloads

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/yamldecode"
)

// Rate is a workload's target rate: a fixed number of messages per second
// (0 = as fast as acks allow) or a schedule of stages.
type Rate struct {
	Fixed  float64
	Stages []Stage
}

// Stage is one part of a rate schedule: a change to a rate (at once or as
// a linear ramp) or a hold of the rate reached.
type Stage struct {
	To   *float64      `yaml:"to" doc:"messages per second to reach, over all threads"`
	Over time.Duration `yaml:"over" default:"0s" doc:"how long the linear ramp from the rate before to to: takes; 0s = at once"`
	Hold time.Duration `yaml:"hold" doc:"keep the rate reached this long"`
}

// FixedRate is a constant rate; 0 means as fast as acks allow.
func FixedRate(r float64) Rate { return Rate{Fixed: r} }

// Unlimited reports whether the rate means "as fast as acks allow".
func (r Rate) Unlimited() bool { return len(r.Stages) == 0 && r.Fixed <= 0 }

// Set reports whether the plan gave a rate at all.
func (r Rate) Set() bool { return len(r.Stages) > 0 || r.Fixed > 0 }

// String is the rate as a plan writes it.
func (r Rate) String() string {
	if len(r.Stages) == 0 {
		return strconv.FormatFloat(r.Fixed, 'g', -1, 64)
	}
	parts := make([]string, len(r.Stages))
	for i, s := range r.Stages {
		switch {
		case s.To != nil && s.Over > 0:
			parts[i] = fmt.Sprintf("{to: %g, over: %s}", *s.To, s.Over)
		case s.To != nil:
			parts[i] = fmt.Sprintf("{to: %g}", *s.To)
		default:
			parts[i] = fmt.Sprintf("{hold: %s}", s.Hold)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// PlanType names the type in `planrun explain` and the README.
func (Rate) PlanType() string { return "number or list of stages" }

// PlanAlternatives are the shapes a rate takes, for the plan schema.
func (Rate) PlanAlternatives() []any { return []any{float64(0), []Stage{}} }

// UnmarshalPlan reads a number or a list of stages.
func (r *Rate) UnmarshalPlan(d *yamldecode.Decoder, n *yaml.Node) {
	*r = Rate{}
	if n.Kind == yaml.SequenceNode {
		if len(n.Content) == 0 {
			d.Errs.At(n, "rate: a schedule needs at least one stage, such as [{to: 1000, over: 1m}, {hold: 5m}]")
			return
		}
		for i, sn := range n.Content {
			var s Stage
			what := fmt.Sprintf("rate stage %d", i+1)
			before := d.Errs.Len()
			d.Decode(sn, &s, what)
			if d.Errs.Len() != before {
				continue
			}
			switch {
			case s.To == nil && s.Hold <= 0:
				d.Errs.At(sn, "%s needs to: (with over: for a ramp) or hold:, such as {to: 1000, over: 1m} or {hold: 5m}", what)
			case s.To != nil && s.Hold != 0:
				d.Errs.At(sn, "%s has to: and hold:; give one per stage (a ramp, then a hold)", what)
			case s.To != nil && *s.To < 0:
				d.Errs.At(sn, "%s: to: must be 0 or more messages per second, got %g", what, *s.To)
			case s.Over < 0 || s.Hold < 0:
				d.Errs.At(sn, "%s: durations must be positive", what)
			case s.To == nil && s.Over != 0:
				d.Errs.At(sn, "%s: over: goes with to: (a ramp to a rate)", what)
			}
			r.Stages = append(r.Stages, s)
		}
		return
	}
	s, ok := d.Scalar(n, "rate")
	if !ok {
		return
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil {
		d.Errs.At(n, "rate: want a number of messages per second or a list of stages such as [{to: 1000, over: 1m}, {hold: 5m}], got %q", s)
		return
	}
	r.Fixed = f // a negative one is reported by the spec's Check
}

// segment is a stretch of a schedule where the rate changes linearly: it
// starts at offset at (from the schedule's start) with n0 messages due
// before it, at rate r0, changing by slope messages/s every second.
type segment struct {
	at    float64 // seconds from the schedule's start
	n0    float64
	r0    float64
	slope float64
	dur   float64 // seconds; +Inf for the last
}

func (s segment) count(t float64) float64 { return s.n0 + s.r0*t + s.slope*t*t/2 }
func (s segment) end() float64            { return s.count(s.dur) }

// schedule is an immutable plan of due times: message k is due when the
// integral of the rate since start reaches k.
type schedule struct {
	start     time.Time
	unlimited bool
	segs      []segment
}

// newSchedule lays r out from start; before is the rate in force just
// before (a ramp starts from it) and n0 the messages already due.
func newSchedule(start time.Time, r Rate, before, n0 float64) *schedule {
	if len(r.Stages) == 0 {
		if r.Fixed <= 0 {
			return &schedule{start: start, unlimited: true}
		}
		return &schedule{start: start, segs: []segment{{n0: n0, r0: r.Fixed, dur: math.Inf(1)}}}
	}
	s := &schedule{start: start}
	at, n, cur := 0.0, n0, before
	add := func(r0, slope, dur float64) {
		seg := segment{at: at, n0: n, r0: r0, slope: slope, dur: dur}
		s.segs = append(s.segs, seg)
		n = seg.end()
		at += dur
	}
	for _, st := range r.Stages {
		switch {
		case st.To != nil && st.Over > 0:
			d := st.Over.Seconds()
			add(cur, (*st.To-cur)/d, d)
			cur = *st.To
		case st.To != nil:
			cur = *st.To
		default:
			add(cur, 0, st.Hold.Seconds())
		}
	}
	// The rate reached holds until the workload stops.
	add(cur, 0, math.Inf(1))
	return s
}

// locate returns the segment in force t seconds after the start.
func (s *schedule) locate(t float64) segment {
	for i := len(s.segs) - 1; i > 0; i-- {
		if t >= s.segs[i].at {
			return s.segs[i]
		}
	}
	return s.segs[0]
}

// rateAt is the target rate t seconds after the start.
func (s *schedule) rateAt(t float64) float64 {
	if s.unlimited {
		return 0
	}
	seg := s.locate(t)
	return seg.r0 + seg.slope*(t-seg.at)
}

// countAt is how many messages are due by t seconds after the start.
func (s *schedule) countAt(t float64) float64 {
	seg := s.locate(t)
	return seg.count(t - seg.at)
}

// due returns when message k is due, or ok=false if the schedule never
// reaches it (it ends at rate 0).
func (s *schedule) due(k int64) (time.Time, bool) {
	x := float64(k)
	for i, seg := range s.segs {
		if i < len(s.segs)-1 && x >= seg.end() {
			continue
		}
		dx := x - seg.n0
		if dx <= 0 {
			return s.at(seg.at), true
		}
		disc := seg.r0*seg.r0 + 2*seg.slope*dx
		den := seg.r0 + math.Sqrt(max(disc, 0))
		if disc < 0 || den <= 0 {
			return time.Time{}, false // the rate falls to 0 before k is due
		}
		// The stable root of slope/2 t² + r0 t - dx = 0.
		return s.at(seg.at + 2*dx/den), true
	}
	return time.Time{}, false
}

func (s *schedule) at(sec float64) time.Time {
	return s.start.Add(time.Duration(sec * float64(time.Second)))
}

// Threads is a new number of sending threads, given to a set step.
type Threads int

// UnmarshalPlan reads a whole number from 1 to 65535.
func (t *Threads) UnmarshalPlan(d *yamldecode.Decoder, n *yaml.Node) {
	var v int
	before := d.Errs.Len()
	d.Decode(n, &v, "threads")
	if d.Errs.Len() == before && (v < 1 || v > 65535) {
		d.Errs.At(n, "threads must be from 1 to 65535, got %d", v)
	}
	*t = Threads(v)
}

// PlanAlternatives is the shape of the value, for the plan schema.
func (Threads) PlanAlternatives() []any { return []any{0} }

func (t Threads) String() string { return strconv.Itoa(int(t)) }

// Scaled is the rate multiplied by f: a shard's part of a workload's rate.
func (r Rate) Scaled(f float64) Rate {
	c := Rate{Fixed: r.Fixed * f}
	for _, s := range r.Stages {
		if s.To != nil {
			to := *s.To * f
			s.To = &to
		}
		c.Stages = append(c.Stages, s)
	}
	return c
}

// Peak is the highest rate the plan asks for: the fixed rate or the
// highest stage (0: as fast as acks allow).
func (r Rate) Peak() float64 {
	m := r.Fixed
	for _, s := range r.Stages {
		if s.To != nil {
			m = max(m, *s.To)
		}
	}
	return m
}
