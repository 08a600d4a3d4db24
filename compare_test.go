package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

// TestCompareGateExitCodes runs compare through the command line on two
// saved results: exit 0 when every --fail-if rule holds, 1 naming the
// figure that breaks one, 2 for a malformed rule or one that names no
// figure.
func TestCompareGateExitCodes(t *testing.T) {
	dir := t.TempDir()
	save := func(name string, p99, rate float64) string {
		na := metrics.Latency{P50: metrics.NA, P99: metrics.NA, Max: metrics.NA}
		r := &results.Result{Plan: "gate", Status: results.Passed, Runs: []results.Run{{Status: results.Passed,
			Kinds: map[string]string{"producer": "produce", "consumer": "consume"},
			Metrics: metrics.Snapshot{Order: []string{"producer", "consumer"}, Phases: []metrics.Phase{
				{Name: "steady", Workloads: map[string]metrics.Stats{
					"producer": {Rate: rate, SendMBps: rate / 1000, Latency: metrics.Latency{P50: 1, P99: p99, Max: 2 * p99}},
					"consumer": {Rate: rate, RecvMBps: rate / 1000, E2E: na}, // n/a: null in the JSON
				}},
			}}}}}
		path := filepath.Join(dir, name)
		if err := r.Save(path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	base, same, worse := save("base.json", 10, 1000), save("same.json", 10.5, 1000), save("worse.json", 12, 1000)
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{args: []string{base, same, "--fail-if", "p99 > +10%"}, code: 0, stdout: "Every --fail-if rule holds"},
		{args: []string{base, worse, "--fail-if", "p99 > +10%", "--fail-if", "msg/s < -5%"}, code: 1, stderr: "p99 > +10%: steady/producer.send.p99: A 10.00 ms, B 12.00 ms, change +20.0%"},
		{args: []string{base, worse, "--fail-if", "steady/producer.max > +3ms"}, code: 1, stderr: "steady/producer.max"},
		{args: []string{base, worse, "--fail-if", "p99 >> 10%"}, code: 2, stderr: "one operator"},
		{args: []string{base, worse, "--fail-if", "p99 > 10"}, code: 2, stderr: "p99 is in ms"},
		{args: []string{base, worse, "--fail-if", "pp99 > +10%"}, code: 2, stderr: "names no figure"},
		{args: []string{base, worse, "--all"}, code: 0, stdout: "| steady | consumer | e2e.p99 | n/a | n/a | |"},
		{args: []string{base}, code: 2, stderr: "compare takes two saved results"},
		// p99 10 -> 10.5: +5%, +0.5 ms; max 20 -> 21: +5%, +1 ms.
		{args: []string{base, same}, code: 0, stdout: "| steady | producer | send.p99 | 10.00 | 10.50 | +5.0% | | steady | producer | send.max | 20.00 | 21.00 | +5.0% |"},
		{args: []string{base, same, "--floor", "10%"}, code: 0, stdout: "11 figures within the floors"},
		{args: []string{base, same, "--floor", "0.6ms"}, code: 0, stdout: "| steady | producer | send.max | 20.00 | 21.00 | +5.0% | 10 figures within the floors"},
		{args: []string{base, same, "--floor", "2"}, code: 2, stderr: `--floor "2": give a percentage`},
	} {
		var out, errOut bytes.Buffer
		code := run(append([]string{"compare"}, tc.args...), &out, &errOut)
		if code != tc.code {
			t.Errorf("compare %q: exit %d, want %d\n%s%s", tc.args, code, tc.code, out.String(), errOut.String())
		}
		if got := strings.Join(strings.Fields(out.String()), " "); !strings.Contains(got, tc.stdout) {
			t.Errorf("compare %q: stdout lacks %q:\n%s", tc.args, tc.stdout, out.String())
		}
		if !strings.Contains(errOut.String(), tc.stderr) {
			t.Errorf("compare %q: stderr lacks %q:\n%s", tc.args, tc.stderr, errOut.String())
		}
	}
}
