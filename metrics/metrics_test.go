package metrics

import (
	"testing"
	"time"
)

func TestCollectorPhases(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewCollector(start)
	r := NewRecorder("p", "produce", Role{Sends: true})
	c.Add(r)
	for i := 0; i < 100; i++ {
		r.Acked(1000, time.Duration(i+1)*time.Millisecond, start.Add(time.Second))
	}
	c.Sample(start.Add(time.Second))
	c.StartPhase("second", start.Add(2*time.Second))
	for i := 0; i < 50; i++ {
		r.Acked(1000, 200*time.Millisecond, start.Add(3*time.Second))
	}
	s := c.Finish(start.Add(4 * time.Second))
	if len(s.Phases) != 2 || s.Phases[0].Name != OpeningPhase || s.Phases[1].Name != "second" {
		t.Fatalf("phases %+v", s.PhaseNames())
	}
	first, second := s.Phases[0].Workloads["p"], s.Phases[1].Workloads["p"]
	if first.Acked != 100 || second.Acked != 50 {
		t.Errorf("acked %d / %d, want 100 / 50", first.Acked, second.Acked)
	}
	if first.SendRate != 50 || second.SendRate != 25 {
		t.Errorf("rates %v / %v, want 50 / 25 (count over phase duration)", first.SendRate, second.SendRate)
	}
	if first.Latency.Max < 99.9 || first.Latency.Max > 100.1 || second.Latency.P50 < 199.9 || second.Latency.P50 > 200.2 {
		t.Errorf("latency per phase: %+v / %+v", first.Latency, second.Latency)
	}
	if s.Workloads["p"].Latency.Count != 150 || s.Workloads["p"].BytesAcked != 150000 {
		t.Errorf("run totals %+v", s.Workloads["p"])
	}
}

func TestHistogramClamps(t *testing.T) {
	h := NewHistogram()
	h.Record(0)
	h.Record(2 * time.Hour)
	out := h.Drain(newHDR())
	if out.TotalCount() != 2 || out.Max() < int64(time.Hour/time.Microsecond)-1000 {
		t.Errorf("count %d max %d", out.TotalCount(), out.Max())
	}
}

// Recording one latency sample and one counter increment is the hot path
// of every send: it must not allocate.
func BenchmarkRecordAcked(b *testing.B) {
	r := NewRecorder("p", "produce", Role{Sends: true})
	now := time.Now()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r.Acked(1024, time.Duration(i%5000)*time.Microsecond, now)
	}
}

func BenchmarkRecordAckedParallel(b *testing.B) {
	r := NewRecorder("p", "produce", Role{Sends: true})
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.Acked(1024, time.Duration(i%5000)*time.Microsecond, now)
			i++
		}
	})
}
