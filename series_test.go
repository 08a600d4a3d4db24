package main

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

// runChild makes the test binary run planrun with the arguments in
// PLANRUN_TEST_ARGS (a JSON list), for tests that need a planrun process
// of their own.
func runChild() {
	if a := os.Getenv("PLANRUN_TEST_ARGS"); a != "" {
		var args []string
		if err := json.Unmarshal([]byte(a), &args); err != nil {
			panic(err)
		}
		os.Exit(run(args, io.Discard, io.Discard))
	}
}

// A run killed with SIGKILL leaves its series file, and report
// --from-series makes its report from it: the phases it went through and
// what each workload counted up to the last second written.
func TestReportFromSeriesAfterKill(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "killed.yaml")
	plan := `name: killed
targets:
  mq: { driver: memory }
workloads:
  producer:
    produce: { topic: a, size: 100B, rate: 2000 }
  consumer:
    consume: { topic: a }
steps:
  - start: [consumer, producer]
    phase: warm
  - sleep: 1500ms
  - sleep: 10m
    phase: steady
`
	if err := os.WriteFile(file, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal([]string{"run", "--quiet", "--out", dir, file})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PLANRUN_TEST_ARGS="+string(args))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	series := filepath.Join(dir, "killed.series.jsonl")
	deadline := time.Now().Add(30 * time.Second)
	for lastSample(t, series) < 3.5 {
		if time.Now().After(deadline) {
			t.Fatal("the run never wrote 3 seconds of samples")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no chance to write a report
		t.Fatal(err)
	}
	_ = cmd.Wait()
	lastT := lastSample(t, series)
	if _, err := os.Stat(filepath.Join(dir, "killed.json")); !os.IsNotExist(err) {
		t.Fatalf("the killed run wrote its result (%v): nothing to test", err)
	}

	var stdout, stderr strings.Builder
	if code := run([]string{"report", "--from-series", "--out", dir, series}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	res := loadResult(t, dir, "killed")
	if res.Status != results.Interrupted || res.Plan != "killed" || len(res.Runs) != 1 || len(res.Targets) != 1 {
		t.Fatalf("result: status %s, plan %q, %d runs, targets %v", res.Status, res.Plan, len(res.Runs), res.Targets)
	}
	run := res.Runs[0]
	if got := strings.Join(run.Metrics.PhaseNames(), ","); got != "warm,steady" {
		t.Errorf("phases %s, want warm,steady", got)
	}
	// The counts are those of the series file's last complete lines, and
	// agree with its per-second rates.
	last, fromRates := seriesCounts(t, series)
	for name, want := range map[string]int64{"producer": last["producer"].Acked, "consumer": last["consumer"].Received} {
		st := run.Metrics.Workloads[name]
		got := st.Acked + st.Received
		// Some messages, and no more than the rate allows in the seconds
		// written: how far a busy machine let the producer get is not
		// asserted.
		if got != want || want <= 0 || float64(want) > 2000*lastT+1 {
			t.Errorf("%s: %d messages in the report, %d in the series file's last line (want some, at most %.0f s x 2000/s)", name, got, want, lastT)
		}
		if fromRates[name] != want {
			t.Errorf("%s: the series file's rates add up to %d messages, its counters say %d", name, fromRates[name], want)
		}
		var inPhases int64
		for _, ph := range run.Metrics.Phases {
			inPhases += ph.Workloads[name].Acked + ph.Workloads[name].Received
		}
		if inPhases != got {
			t.Errorf("%s: phases add up to %d, the run to %d", name, inPhases, got)
		}
	}
	if lat := run.Metrics.Workloads["producer"].Latency; lat.Count < last["producer"].Acked-100 || lat.P99 <= 0 {
		t.Errorf("producer latency %+v for %d acked", lat, last["producer"].Acked)
	}
	if !strings.Contains(stdout.String(), "| steady | producer |") {
		t.Errorf("report:\n%s", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "killed.md")); err != nil {
		t.Error(err)
	}
}

// lastSample is the time of the series file's last per-second sample.
func lastSample(t *testing.T, path string) float64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	last := 0.0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l metrics.SeriesLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Workload != "" && l.Interval > 0 {
			last = l.T
		}
	}
	return last
}

// seriesCounts reads a series file's last counters per workload, and the
// messages its per-second rates add up to.
func seriesCounts(t *testing.T, path string) (map[string]metrics.Counters, map[string]int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]metrics.Counters{}
	sum := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		var l metrics.SeriesLine
		if json.Unmarshal([]byte(line), &l) != nil || l.Workload == "" || l.State == nil {
			continue
		}
		last[l.Workload] = l.State.Counters
		sum[l.Workload] += math.Round((l.SendRate + l.RecvRate) * l.Interval)
	}
	fromRates := map[string]int64{}
	for k, v := range sum {
		fromRates[k] = int64(v)
	}
	return last, fromRates
}
