package workloads

import (
	"testing"
	"time"
)

// A linger adds room for what the rate sends while messages wait in it,
// so that threads do not cap the rate; without a rate or a linger the
// threads alone bound the messages in flight.
func TestAsyncLimitAllowsTheLinger(t *testing.T) {
	to := 20000.0
	for _, c := range []struct {
		threads int
		rate    Rate
		gather  time.Duration
		want    int64
	}{
		{32, FixedRate(10000), 5 * time.Millisecond, 32 + 1050},
		{32, FixedRate(10000), 0, 32},
		{2, FixedRate(0), 5 * time.Millisecond, 2},
		{4, Rate{Fixed: 100, Stages: []Stage{{To: &to, Over: time.Second}}}, time.Millisecond, 4 + 2020},
	} {
		a := &asyncSender{threads: c.threads, rate: c.rate, gather: c.gather}
		if got := a.limitOf(); got != c.want {
			t.Errorf("threads %d, rate %s, linger %s: limit %d, want %d", c.threads, c.rate, c.gather, got, c.want)
		}
	}
}
