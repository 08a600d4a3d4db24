package metrics

// Per-second series stay bounded in memory on long runs: once a series
// holds maxPoints points, its older half is merged pairwise into points
// covering twice the time, so the last quarter of the points or more stays
// per second and the whole run still shows in reports, coarser the older
// it is. The series file (Collector.SetSink) keeps every second, and a
// report made from it (ReadSeries) has them all.
const maxPoints = 1024

func appendBounded(ps []Point, p Point) []Point {
	if len(ps) >= maxPoints {
		ps = compact(ps, mergePoints)
	}
	return append(ps, p)
}

func appendBoundedExtra(ps []ExtraPoint, p ExtraPoint) []ExtraPoint {
	if len(ps) >= maxPoints {
		ps = compact(ps, mergeExtra)
	}
	return append(ps, p)
}

// compact merges the points of ps's older half pairwise, in place. merge
// says whether two neighbours can be one point (not across a phase change)
// and makes it.
func compact[P any](ps []P, merge func(a, b P) (P, bool)) []P {
	half := len(ps) / 2
	out := ps[:0]
	i := 0
	for ; i+1 < half; i += 2 {
		if m, ok := merge(ps[i], ps[i+1]); ok {
			out = append(out, m)
		} else {
			out = append(out, ps[i], ps[i+1])
		}
	}
	out = append(out, ps[i:]...)
	clear(ps[len(out):])
	return out
}

// mergePoints makes one point of two consecutive samples of a phase: counts
// added, rates weighted by the time they cover, the higher p99, the later backlog, lag
// and gauges.
func mergePoints(a, b Point) (Point, bool) {
	if a.Phase != b.Phase {
		return a, false
	}
	iv := a.Interval + b.Interval
	if iv <= 0 {
		return a, false
	}
	wa, wb := a.Interval/iv, b.Interval/iv
	m := b
	m.Interval = iv
	m.Sent, m.Acked, m.Failed, m.Received = a.Sent+b.Sent, a.Acked+b.Acked, a.Failed+b.Failed, a.Received+b.Received
	m.BytesAcked, m.BytesReceived = a.BytesAcked+b.BytesAcked, a.BytesReceived+b.BytesReceived
	m.SendRate = a.SendRate*wa + b.SendRate*wb
	m.RecvRate = a.RecvRate*wa + b.RecvRate*wb
	m.SendMBps = a.SendMBps*wa + b.SendMBps*wb
	m.RecvMBps = a.RecvMBps*wa + b.RecvMBps*wb
	m.P99 = max(a.P99, b.P99)
	m.E2EP99 = max(a.E2EP99, b.E2EP99)
	return m, true
}

// mergeExtra keeps the later of two extra samples.
func mergeExtra(_, b ExtraPoint) (ExtraPoint, bool) { return b, true }
