package reporters

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
)

// MaxChartPoints is how many points each curve of the HTML report holds at
// most: a run of a day (86,400 per-second samples) still makes a page a
// browser opens at once.
const MaxChartPoints = 2000

// Column is one curve's values on a chart's time axis; NaN (no value:
// the workload had not started, or a second without messages has no
// latency) is written as null, which the page draws as a gap.
type Column []float64

// MarshalJSON writes NaN as null and numbers in their shortest form.
func (c Column) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 8*len(c)+2)
	b = append(b, '[')
	for i, v := range c {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads null as NaN.
func (c *Column) UnmarshalJSON(data []byte) error {
	var raw []*float64
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*c = make(Column, len(raw))
	for i, p := range raw {
		(*c)[i] = math.NaN()
		if p != nil {
			(*c)[i] = *p
		}
	}
	return nil
}

// Curve is one curve before alignment: its values at its own times (NaN
// for a gap).
type Curve struct {
	T, V []float64
}

// Downsample puts curves on one time axis, as a chart draws them, with at
// most maxPoints points (at least 2). With as many distinct times as that
// or fewer, every value is kept at its own time. With more, the time span
// is cut into maxPoints/2 buckets of equal length and each curve keeps,
// per bucket, its lowest and its highest value, in the order they came:
// every peak and every trough stays on the chart, moved in time by less
// than a bucket. A curve with no value in a bucket has a gap there.
func Downsample(curves []Curve, maxPoints int) (Column, []Column) {
	maxPoints = max(maxPoints, 2)
	var times []float64
	for _, c := range curves {
		times = append(times, c.T...)
	}
	slices.Sort(times)
	times = slices.Compact(times)
	out := make([]Column, len(curves))
	if len(times) <= maxPoints {
		at := make(map[float64]int, len(times))
		for i, t := range times {
			at[t] = i
		}
		for k, c := range curves {
			col := nanColumn(len(times))
			for i, t := range c.T {
				col[at[t]] = c.V[i]
			}
			out[k] = col
		}
		return times, out
	}
	buckets := maxPoints / 2
	lo, hi := times[0], times[len(times)-1]
	width := (hi - lo) / float64(buckets)
	bucket := func(t float64) int {
		return min(max(int((t-lo)/width), 0), buckets-1)
	}
	// Each bucket holding samples gives the axis its first and last time
	// (one point when they are the same).
	first := make([]float64, buckets)
	last := make([]float64, buckets)
	used := make([]bool, buckets)
	for _, t := range times {
		b := bucket(t)
		if !used[b] {
			used[b], first[b] = true, t
		}
		last[b] = t
	}
	row := make([]int, buckets) // the axis index of a bucket's first point
	var axis Column
	for b := range buckets {
		if !used[b] {
			continue
		}
		row[b] = len(axis)
		axis = append(axis, first[b])
		if last[b] != first[b] {
			axis = append(axis, last[b])
		}
	}
	for k, c := range curves {
		col := nanColumn(len(axis))
		// Per bucket, the index in c of its lowest and highest value.
		lowest := make([]int, buckets)
		highest := make([]int, buckets)
		for b := range lowest {
			lowest[b], highest[b] = -1, -1
		}
		for i, v := range c.V {
			if math.IsNaN(v) {
				continue
			}
			b := bucket(c.T[i])
			if lowest[b] < 0 || v < c.V[lowest[b]] {
				lowest[b] = i
			}
			if highest[b] < 0 || v > c.V[highest[b]] {
				highest[b] = i
			}
		}
		for b := range buckets {
			if lowest[b] < 0 {
				continue
			}
			r := row[b]
			two := last[b] != first[b]
			a, z := lowest[b], highest[b]
			if z < a {
				a, z = z, a
			}
			col[r] = c.V[a]
			if two {
				col[r+1] = c.V[z]
			}
		}
		out[k] = col
	}
	return axis, out
}

func nanColumn(n int) Column {
	c := make(Column, n)
	for i := range c {
		c[i] = math.NaN()
	}
	return c
}
