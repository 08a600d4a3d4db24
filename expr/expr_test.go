package expr

import (
	"errors"
	"strings"
	"testing"

	"github.com/planrun/planrun/metrics"
)

// A comparison over a figure that was not measured fails and names the
// figure; figures that were measured compare as numbers, whichever side
// they are on.
func TestComparisonOverNotMeasured(t *testing.T) {
	scope := NewScope(map[string]string{"limit": "100"})
	scope.Workloads = []string{"producer"}
	scope.Phases = []string{"short"}
	short := metrics.Stats{Acked: 1, Rate: metrics.NA, MaxRate: metrics.NA, Latency: metrics.Latency{Count: 1, P99: 3}}
	short.E2E.P99 = metrics.NA
	env := scope.Env(Figures{
		Workloads: map[string]metrics.Stats{"producer": {Acked: 500, Rate: 250, MaxRate: 300}},
		Phases:    map[string]map[string]metrics.Stats{"short": {"producer": short}},
	})
	for _, c := range []struct {
		src  string
		want bool
		na   string // the figure named by the error, "" for none
	}{
		{src: `producer.max_rate >= producer.rate`, want: true},
		{src: `producer.rate > vars.limit && producer.acked == 500`, want: true},
		{src: `300 < producer.max_rate`},
		{src: `phases["short"].producer.latency.p99 < 5`, want: true},
		{src: `phases["short"].producer.max_rate < 1000`, na: `phases.short.producer.max_rate`},
		{src: `phases["short"].producer.max_rate >= 0`, na: `phases.short.producer.max_rate`},
		{src: `1 == phases["short"].producer.rate`, na: `phases.short.producer.rate`},
		{src: `producer.acked > 0 && phases["short"].producer.e2e.p99 != 2`, na: `phases.short.producer.e2e.p99`},
		{src: `producer.acked < 0 && phases["short"].producer.e2e.p99 < 2`}, // never reached
	} {
		prog, err := compile(c.src, scope, true)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		b := BoolExpr{Expr{Src: c.src, prog: prog}}
		got, err := b.True(env)
		var na *NAError
		switch {
		case c.na == "" && err != nil:
			t.Errorf("%s: %v", c.src, err)
		case c.na == "" && got != c.want:
			t.Errorf("%s = %v, want %v", c.src, got, c.want)
		case c.na != "" && (!errors.As(err, &na) || na.Figure != c.na || got):
			t.Errorf("%s = %v, %v; want an error saying %s is n/a", c.src, got, err, c.na)
		case c.na != "" && !strings.Contains(err.Error(), c.na+" is n/a"):
			t.Errorf("%s: error %q does not say what is n/a", c.src, err)
		}
	}
	// What the plan gets wrong is still found when it loads.
	if _, err := compile(`producer.rate > "fast"`, scope, true); err == nil {
		t.Error(`producer.rate > "fast" compiled`)
	}
	if got := FormatValue("producer.max_rate", metrics.NA); got != "n/a" {
		t.Errorf("NA prints %q", got)
	}
}
