package reporters

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
)

// curve makes a curve of n per-second samples starting at t0 whose value
// at i is f(i).
func curve(t0 float64, n int, f func(i int) float64) Curve {
	c := Curve{T: make([]float64, n), V: make([]float64, n)}
	for i := range n {
		c.T[i], c.V[i] = t0+float64(i), f(i)
	}
	return c
}

func TestDownsample(t *testing.T) {
	wave := func(i int) float64 { return 1000 + 500*math.Sin(float64(i)/40) }
	spiky := func(i int) float64 {
		switch i {
		case 4321:
			return 99999 // one second's peak in a day
		case 77:
			return -5
		}
		return float64(i % 10)
	}
	gappy := func(i int) float64 {
		if i%7 == 0 || (i > 3000 && i < 5000) {
			return math.NaN()
		}
		return float64(i)
	}
	for _, tc := range []struct {
		name   string
		curves []Curve
		max    int
		// exact: every sample kept at its own time.
		exact bool
	}{
		{"short run kept whole", []Curve{curve(0, 300, wave), curve(0, 300, spiky)}, 2000, true},
		{"exactly the bound", []Curve{curve(0, 2000, wave)}, 2000, true},
		{"one over the bound", []Curve{curve(0, 2001, wave)}, 2000, false},
		{"a day of seconds", []Curve{curve(0, 86400, wave), curve(0, 86400, spiky)}, 2000, false},
		{"peaks in a long run", []Curve{curve(0, 10000, spiky)}, 100, false},
		{"curves starting late", []Curve{curve(0, 9000, wave), curve(4500.5, 3000, spiky)}, 500, false},
		{"gaps", []Curve{curve(0, 8000, gappy)}, 1000, false},
		{"odd bound", []Curve{curve(0, 5000, wave)}, 7, false},
		{"tiny bound", []Curve{curve(0, 50, wave)}, 1, false},
		{"no curves", nil, 2000, true},
		{"empty curve", []Curve{{}}, 2000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			axis, cols := Downsample(tc.curves, tc.max)
			bound := max(tc.max, 2)
			if len(axis) > bound {
				t.Fatalf("%d points on the axis, more than the bound %d", len(axis), bound)
			}
			if !slices.IsSorted(axis) || len(slices.Compact(slices.Clone(axis))) != len(axis) {
				t.Fatalf("the time axis is not strictly increasing: %v", axis)
			}
			if len(cols) != len(tc.curves) {
				t.Fatalf("%d columns for %d curves", len(cols), len(tc.curves))
			}
			for k, c := range tc.curves {
				col := cols[k]
				if len(col) != len(axis) {
					t.Fatalf("curve %d: %d values for %d times", k, len(col), len(axis))
				}
				lo, hi := extremes(c.V)
				glo, ghi := extremes(col)
				if !same(lo, glo) || !same(hi, ghi) {
					t.Errorf("curve %d: lowest/highest %v/%v after downsampling, %v/%v before", k, glo, ghi, lo, hi)
				}
				if tc.exact {
					kept := 0
					for i, v := range c.V {
						j, ok := slices.BinarySearch(axis, c.T[i])
						if !ok || !same(col[j], v) {
							t.Fatalf("curve %d: sample %d (t=%v, %v) not kept", k, i, c.T[i], v)
						}
						kept++
					}
					if kept != len(c.V) {
						t.Fatalf("kept %d of %d", kept, len(c.V))
					}
					continue
				}
				// Every value shown is one of the curve's, shown within a
				// bucket's width of its own time.
				width := (axis[len(axis)-1] - axis[0]) / float64(bound/2)
				for j, v := range col {
					if math.IsNaN(v) {
						continue
					}
					found := false
					for i := range c.V {
						if c.V[i] == v && math.Abs(c.T[i]-axis[j]) <= width+1e-9 {
							found = true
							break
						}
					}
					if !found {
						t.Fatalf("curve %d: value %v at t=%v is not a sample within %v s", k, v, axis[j], width)
					}
				}
			}
		})
	}
}

// A stretch without values longer than a bucket stays a gap, and a curve
// that starts late has no values before it starts.
func TestDownsampleGaps(t *testing.T) {
	gap := curve(0, 10000, func(i int) float64 {
		if i >= 4000 && i < 6000 {
			return math.NaN()
		}
		return 1
	})
	late := curve(5000, 5000, func(int) float64 { return 2 })
	axis, cols := Downsample([]Curve{gap, late}, 200)
	// Buckets are 100 s long: those wholly inside the gap show it, those
	// wholly outside have values.
	gaps := 0
	for j, tt := range axis {
		got := math.IsNaN(cols[0][j])
		if got {
			gaps++
		}
		if (tt >= 4100 && tt < 5900 && !got) || ((tt < 3900 || tt >= 6100) && got) {
			t.Fatalf("t=%v: gap %v", tt, got)
		}
		if tt < 4900 && !math.IsNaN(cols[1][j]) {
			t.Fatalf("t=%v: the late curve has a value %v before it started", tt, cols[1][j])
		}
	}
	if gaps == 0 {
		t.Fatal("no gap shown")
	}
}

// Columns are JSON arrays with null for a gap, read back as NaN.
func TestColumnJSON(t *testing.T) {
	b, err := json.Marshal(Column{1, math.NaN(), 2.5, math.Inf(1), 1e21})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "[1,null,2.5,null,1e+21]" {
		t.Fatalf("got %s", b)
	}
	var c Column
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if len(c) != 5 || c[0] != 1 || !math.IsNaN(c[1]) || c[2] != 2.5 || c[4] != 1e21 {
		t.Fatalf("read back %v", c)
	}
}

func extremes(vs []float64) (lo, hi float64) {
	lo, hi = math.NaN(), math.NaN()
	for _, v := range vs {
		if math.IsNaN(v) {
			continue
		}
		if math.IsNaN(lo) || v < lo {
			lo = v
		}
		if math.IsNaN(hi) || v > hi {
			hi = v
		}
	}
	return lo, hi
}

func same(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
