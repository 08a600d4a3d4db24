package metrics

// wholeSecond is the least interval that counts as a per-second peak.
const wholeSecond = 1 - 1e-6

// setCounts makes the point's counts d over iv seconds, and its rates.
func (p *Point) setCounts(d Counters, iv float64) {
	p.Interval = iv
	p.Sent, p.Acked, p.Failed, p.Received = d.Sent, d.Acked, d.Failed, d.Received
	p.BytesAcked, p.BytesReceived = d.BytesAcked, d.BytesReceived
	p.SendRate, p.RecvRate, p.SendMBps, p.RecvMBps = 0, 0, 0, 0
	if iv > 0 {
		p.SendRate = float64(d.Acked) / iv
		p.RecvRate = float64(d.Received) / iv
		p.SendMBps = float64(d.BytesAcked) / iv / 1e6
		p.RecvMBps = float64(d.BytesReceived) / iv / 1e6
	}
}

// counts are the point's counts as counters.
func (p Point) counts() Counters {
	return Counters{Sent: p.Sent, Acked: p.Acked, Failed: p.Failed, Received: p.Received, BytesAcked: p.BytesAcked, BytesReceived: p.BytesReceived}
}

// add makes p the point of its interval followed by q's.
func (p *Point) add(q Point) {
	c := p.counts()
	d := q.counts()
	c.Sent += d.Sent
	c.Acked += d.Acked
	c.Failed += d.Failed
	c.Received += d.Received
	c.BytesAcked += d.BytesAcked
	c.BytesReceived += d.BytesReceived
	p99, e2e := max(p.P99, q.P99), max(p.E2EP99, q.E2EP99)
	iv := p.Interval + q.Interval
	*p = q
	p.setCounts(c, iv)
	p.P99, p.E2EP99 = p99, e2e
}

// peaks are the best whole-second rates of a window (a phase, the run).
type peaks struct {
	send, recv float64
	whole      bool // some point covered a whole second
}

func (k *peaks) see(p Point) {
	if p.Interval < wholeSecond {
		return
	}
	k.send, k.recv, k.whole = max(k.send, p.SendRate), max(k.recv, p.RecvRate), true
}

// set gives s the peaks as its per-second maxima: not measured when no
// point covered a whole second or the direction had no messages.
func (k peaks) set(s *Stats) {
	s.MaxSendRate, s.MaxRecvRate = k.send, k.recv
	if !k.whole || s.Acked == 0 {
		s.MaxSendRate = NA
	}
	if !k.whole || s.Received == 0 {
		s.MaxRecvRate = NA
	}
}

// windowRates sets the rates of a window (a phase) of dur seconds in
// which d was counted: the counts over its length, or for a window shorter
// than a second, from its first to its last message (see Span.Rate).
func (s *Stats) windowRates(d Counters, dur float64, spans [2]Span) {
	if dur >= 1 {
		s.setRates(d, dur)
		return
	}
	s.SendRate, s.RecvRate = spans[0].Rate(d.Acked), spans[1].Rate(d.Received)
	s.SendMBps, s.RecvMBps = NA, NA
	if !IsNA(s.SendRate) {
		s.SendMBps = s.SendRate * float64(d.BytesAcked) / float64(d.Acked) / 1e6
	}
	if !IsNA(s.RecvRate) {
		s.RecvMBps = s.RecvRate * float64(d.BytesReceived) / float64(d.Received) / 1e6
	}
}
