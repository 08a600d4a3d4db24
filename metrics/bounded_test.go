package metrics

import "testing"

func TestSeriesStaysBounded(t *testing.T) {
	var ps []Point
	const n = 3600
	for i := 1; i <= n; i++ {
		phase := "one"
		if i > n/2 {
			phase = "two"
		}
		ps = appendBounded(ps, Point{T: float64(i), Interval: 1, Phase: phase, SendRate: float64(100 + i%2*10), P99: float64(i % 7)})
	}
	if len(ps) > maxPoints {
		t.Fatalf("%d points kept, want at most %d", len(ps), maxPoints)
	}
	var covered, sent float64
	for i, p := range ps {
		covered += p.Interval
		sent += p.SendRate * p.Interval
		if i > 0 && p.T <= ps[i-1].T {
			t.Fatalf("point %d at %g s after %g s", i, p.T, ps[i-1].T)
		}
		if (p.T > n/2) != (p.Phase == "two") || (p.T-p.Interval < n/2 && p.Phase == "two") {
			t.Fatalf("point %+v spans the phase change at %d s", p, n/2)
		}
		if p.P99 < 0 || p.P99 > 6 {
			t.Fatalf("p99 %g out of the samples' range", p.P99)
		}
	}
	if covered != n {
		t.Errorf("points cover %g s, want %d", covered, n)
	}
	if want := float64(n/2*100 + n/2*110); sent != want {
		t.Errorf("rates x intervals sum to %g messages, want %g", sent, want)
	}
	for i, p := range ps[len(ps)-maxPoints/4:] {
		if p.Interval != 1 {
			t.Fatalf("recent point %d covers %g s, want 1", i, p.Interval)
		}
	}
	if ps[len(ps)-1].T != n {
		t.Errorf("last point at %g s, want %d", ps[len(ps)-1].T, n)
	}
}
