package metrics

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// sim drives a collector the way a run does: the sampler takes a sample
// whenever one is due (Tick at NextSample) while messages are counted at
// their own times and phases change between samples.
type sim struct {
	t0   time.Time
	c    *Collector
	prod *Recorder
	cons *Recorder
	file bytes.Buffer
}

func newSim() *sim {
	s := &sim{t0: time.Unix(1_700_000_000, 0)}
	s.c = NewCollector(s.t0)
	s.c.SetSink(&s.file, "")
	s.c.SetSeriesHeader(SeriesHeader{})
	s.prod = NewRecorder("producer", "produce", Role{Sends: true})
	s.cons = NewRecorder("consumer", "consume", Role{Receives: true})
	s.c.Add(s.prod)
	s.c.Add(s.cons)
	return s
}

func (s *sim) at(sec float64) time.Time { return s.t0.Add(time.Duration(math.Round(sec * 1e9))) }

// until takes the samples due up to sec.
func (s *sim) until(sec float64) {
	for next := s.c.NextSample(); !next.After(s.at(sec)); next = s.c.NextSample() {
		if !s.c.Tick(next) {
			panic("a due sample was not taken")
		}
	}
}

func (s *sim) phase(name string, sec float64) {
	s.until(sec)
	s.c.StartPhase(name, s.at(sec))
}

// send has the producer's n messages acked evenly from from to to (both
// included) and, when received, the consumer receive them at once.
func (s *sim) send(n int, from, to float64, received bool) {
	for i := range n {
		sec := from
		if n > 1 {
			sec += (to - from) * float64(i) / float64(n-1)
		}
		s.until(sec)
		s.prod.Sent(s.at(sec))
		s.prod.Acked(100, 2*time.Millisecond, s.at(sec))
		if received {
			s.cons.Received(100, 5*time.Millisecond, s.at(sec))
		}
	}
}

// receive has the consumer receive n messages evenly from from to to.
func (s *sim) receive(n int, from, to float64) {
	for i := range n {
		sec := from + (to-from)*float64(i)/float64(max(n-1, 1))
		s.until(sec)
		s.cons.Received(100, time.Second, s.at(sec))
	}
}

func phaseByName(t *testing.T, snap Snapshot, name string) Phase {
	t.Helper()
	for _, p := range snap.Phases {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no phase %q in %v", name, snap.PhaseNames())
	return Phase{}
}

func near6(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

// The figures of phases that received nothing, that are shorter than a
// second, or whose messages all came early, and the lag's age: each case
// is a run with the expectations on its phases.
func TestPhaseFigures(t *testing.T) {
	for _, c := range []struct {
		name  string
		run   func(s *sim)
		check func(t *testing.T, snap Snapshot)
	}{{
		// The quickstart's cold read: the consumer, stopped while the
		// producer filled the topic, reads the backlog in its first 0.4 s.
		name: "cold read",
		run: func(s *sim) {
			s.phase("fill", 0)
			s.cons.SetLagAt(154204, s.at(1.1))
			s.send(2300, 0, 2.299, false)
			s.phase("cold-read", 2.3)
			s.receive(4000, 2.3, 2.7)
			s.phase("idle", 4.3)
			s.until(5.3)
		},
		check: func(t *testing.T, snap Snapshot) {
			fill, cold := phaseByName(t, snap, "fill").Workloads["consumer"], phaseByName(t, snap, "cold-read").Workloads["consumer"]
			if !IsNA(fill.MaxRecvRate) || !IsNA(fill.E2E.P99) || !IsNA(fill.E2E.Avg) || fill.E2E.Count != 0 || fill.RecvRate != 0 {
				t.Errorf("fill, nothing received: max %v, e2e %+v, rate %v; want n/a, n/a, 0", fill.MaxRecvRate, fill.E2E, fill.RecvRate)
			}
			if cold.Received != 4000 || !near6(cold.RecvRate, 2000) || cold.MaxRecvRate != 4000 {
				t.Errorf("cold read: %d received, %v msg/s, max %v; want 4000, 2000, 4000", cold.Received, cold.RecvRate, cold.MaxRecvRate)
			}
			if !near6(fill.LagAge, 1.2) || !near6(cold.LagAge, 3.2) || cold.Lag != 154204 {
				t.Errorf("lag %d aged %v s at the fill's end, %v s at the cold read's; want 1.2 and 3.2", cold.Lag, fill.LagAge, cold.LagAge)
			}
			prod := phaseByName(t, snap, "cold-read").Workloads["producer"]
			if !IsNA(prod.MaxSendRate) || !IsNA(prod.Latency.P50) || prod.SendRate != 0 {
				t.Errorf("producer, nothing sent: max %v, latency %+v, rate %v", prod.MaxSendRate, prod.Latency, prod.SendRate)
			}
		},
	}, {
		// 2,001 messages in half a second, and a drain of 61 messages over
		// its first 0.1 s: rates from the first to the last message, and
		// no per-second maximum.
		name: "short phases",
		run: func(s *sim) {
			s.phase("warm", 0)
			s.send(1000, 0, 1.6, true)
			s.phase("burst", 1.7)
			s.send(2001, 1.7, 2.2, true)
			s.phase("drain", 2.2)
			s.send(61, 2.2, 2.3, false)
			s.phase("one", 2.5)
			s.send(1, 2.55, 2.55, true)
			s.phase("none", 2.6)
			// The MQTT drain: acks of sends meant at 600/s come back in one
			// batch, and are received in one.
			s.phase("batch", 2.9)
			s.until(3.1)
			for i := range 100 {
				lat := time.Duration(float64(99-i)/600*1e9) + time.Millisecond
				s.prod.Sent(s.at(3.1).Add(-lat))
				s.prod.Acked(100, lat, s.at(3.1))
				s.cons.Received(100, time.Millisecond, s.at(3.1))
			}
			s.phase("after", 3.2)
			s.until(4)
		},
		check: func(t *testing.T, snap Snapshot) {
			for _, c := range []struct {
				phase, workload string
				count           int64
				rate            float64 // NaN: n/a
			}{
				{"burst", "producer", 2001, 4000},
				{"burst", "consumer", 2001, 4000},
				{"drain", "producer", 61, 600},
				{"drain", "consumer", 0, NA},
				{"one", "producer", 1, NA},
				{"one", "consumer", 1, NA},
				{"none", "producer", 0, NA},
				{"batch", "producer", 100, 600},
				{"batch", "consumer", 100, NA},
			} {
				st := phaseByName(t, snap, c.phase).Workloads[c.workload]
				n, rate, mbps := st.Acked, st.SendRate, st.SendMBps
				if c.workload == "consumer" {
					n, rate, mbps = st.Received, st.RecvRate, st.RecvMBps
				}
				if n != c.count || (IsNA(c.rate) != IsNA(rate)) || (!IsNA(c.rate) && !near6(rate, c.rate)) || !IsNA(st.MaxRate) {
					t.Errorf("%s, %s: %d messages at %v msg/s, max %v; want %d at %v, max n/a", c.phase, c.workload, n, rate, st.MaxRate, c.count, c.rate)
				}
				if !IsNA(rate) && !near6(mbps, rate*100/1e6) {
					t.Errorf("%s, %s: %v MB/s at %v msg/s of 100 bytes", c.phase, c.workload, mbps, rate)
				}
			}
		},
	}, {
		// A broker down for 3 s: nothing received, nothing acked; then
		// everything at once when it is back.
		name: "outage",
		run: func(s *sim) {
			s.phase("up", 0)
			s.send(300, 0, 2.95, true)
			s.phase("down", 3.05)
			s.until(6.05)
			s.phase("back", 6.05)
			s.send(3000, 6.05, 6.3, true)
			s.until(8.6)
		},
		check: func(t *testing.T, snap Snapshot) {
			down := phaseByName(t, snap, "down")
			for name, st := range down.Workloads {
				if !IsNA(st.MaxRate) || !IsNA(st.Latency.Max) || !IsNA(st.E2E.Max) || st.Rate != 0 {
					t.Errorf("down, %s: max %v, latency %v, e2e %v, rate %v; want n/a and 0", name, st.MaxRate, st.Latency.Max, st.E2E.Max, st.Rate)
				}
			}
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			s := newSim()
			c.run(s)
			snap := s.c.Finish(s.c.NextSample())
			c.check(t, snap)
			checkPoints(t, snap)
			// The series file makes the same phases.
			runs, err := ReadSeries(strings.NewReader(s.file.String()))
			if err != nil {
				t.Fatal(err)
			}
			got := runs[0].Metrics
			for i, p := range snap.Phases {
				for name, w := range p.Workloads {
					w.Running = false
					if g := got.Phases[i].Workloads[name]; !sameFigures(t, g, w) {
						t.Errorf("series file, phase %s, %s:\n got %+v\nwant %+v", p.Name, name, g, w)
					}
				}
			}
			for name := range snap.Series {
				if !sameFigures(t, got.Series[name], snap.Series[name]) {
					t.Errorf("series file, %s: points differ", name)
				}
			}
		})
	}
}

// checkPoints checks what every run's per-second points promise: each
// lies within its phase, their counts add up to the phase's, and the
// per-second maximum of a phase of a second or more is at least its
// average and is n/a in a shorter one.
func checkPoints(t *testing.T, snap Snapshot) {
	t.Helper()
	for _, p := range snap.Phases {
		for name, st := range p.Workloads {
			var sum Counters
			for _, pt := range snap.Series[name] {
				if pt.Phase != p.Name || pt.T <= p.Start+1e-9 || pt.T > p.End+1e-9 {
					continue
				}
				if pt.T-pt.Interval < p.Start-1e-9 {
					t.Errorf("phase %s, %s: the point at %.3f s covers %.3f s, before the phase's start at %.3f s", p.Name, name, pt.T, pt.Interval, p.Start)
				}
				sum.Sent += pt.Sent
				sum.Acked += pt.Acked
				sum.Failed += pt.Failed
				sum.Received += pt.Received
				sum.BytesAcked += pt.BytesAcked
				sum.BytesReceived += pt.BytesReceived
			}
			want := Counters{Sent: st.Sent, Acked: st.Acked, Failed: st.Failed, Received: st.Received, BytesAcked: st.BytesAcked, BytesReceived: st.BytesReceived}
			if sum != want {
				t.Errorf("phase %s, %s: points add up to %+v, the phase has %+v", p.Name, name, sum, want)
			}
			for _, r := range [][2]float64{{st.SendRate, st.MaxSendRate}, {st.RecvRate, st.MaxRecvRate}} {
				switch {
				case p.Duration() < 1 && !IsNA(r[1]):
					t.Errorf("phase %s (%.2f s), %s: per-second maximum %v; want n/a", p.Name, p.Duration(), name, r[1])
				case p.Duration() >= 1 && r[0] > 0 && !(r[1] >= r[0]*(1-1e-9)):
					t.Errorf("phase %s (%.2f s), %s: per-second maximum %v below the average %v", p.Name, p.Duration(), name, r[1], r[0])
				}
			}
		}
	}
}

// Figures not measured are null in JSON and read back as not measured;
// a result written before they were has numbers, read as they are.
func TestNotMeasuredJSON(t *testing.T) {
	st := Stats{Acked: 1, Rate: NA, MaxRate: NA, SendRate: 12.5, LagAge: NA, Lag: -1}
	st.Latency = Latency{}.orNA(0)
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"rate":null`, `"max_rate":null`, `"send_rate":12.5`, `"lag_age_s":null`, `"latency":{"count":0,"avg_ms":null`, `"p99_ms":null`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("%s lacks %s", data, want)
		}
	}
	var back Stats
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !IsNA(back.Rate) || !IsNA(back.MaxRate) || back.SendRate != 12.5 || !IsNA(back.Latency.P99) || back.Acked != 1 || back.Lag != -1 {
		t.Errorf("read back %+v", back)
	}
	var old Stats
	if err := json.Unmarshal([]byte(`{"acked":5,"rate":2.5,"max_rate":0,"latency":{"count":5,"p99_ms":1.5},"lag":-1}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.Acked != 5 || old.Rate != 2.5 || old.MaxRate != 0 || old.Latency.P99 != 1.5 || old.LagAge != 0 || old.Latency.Max != 0 {
		t.Errorf("an older result read as %+v", old)
	}
}
