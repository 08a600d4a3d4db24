package reporters

import (
	"bytes"
	"encoding/xml"
	"flag"
	"image"
	_ "image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./reporters -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./reporters -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// syntheticRun is a run of a producer, a consumer and a relay over two
// phases, with a collector. scale multiplies rates and latencies so that
// two results can be compared.
func syntheticRun(label string, scale float64) results.Run {
	lat := func(p99 float64) metrics.Latency {
		return metrics.Latency{Count: 1000, Avg: p99 / 3 * scale, P50: p99 / 4 * scale, P95: p99 / 2 * scale, P99: p99 * scale, P999: p99 * 1.5 * scale, Max: p99 * 2 * scale}
	}
	run := results.Run{
		Label: label, Status: results.Passed, Started: t0, Finished: t0.Add(20 * time.Second),
		Kinds: map[string]string{"producer": "produce", "consumer": "consume", "mirror": "relay"},
	}
	if label != "" {
		run.Combination = map[string]string{"size": strings.TrimPrefix(label, "size=")}
	}
	var series = map[string][]metrics.Point{}
	var extra []metrics.ExtraPoint
	for s := 1; s <= 10; s++ {
		t := float64(s) + 0.001
		phase := "warm"
		if s > 4 {
			phase = "steady"
		}
		rate := 100 * float64(s) * scale
		p99 := 0.0
		if s != 6 {
			p99 = 2 * float64(s) * scale // second 6 has no messages: a gap
		}
		series["producer"] = append(series["producer"], metrics.Point{T: t, Interval: 1, Phase: phase, SendRate: rate, SendMBps: rate / 1000, P99: p99, Lag: -1,
			Sent: int64(rate) + 1, Acked: int64(rate), Failed: 1, BytesAcked: int64(rate * 1000)})
		series["consumer"] = append(series["consumer"], metrics.Point{T: t, Interval: 1, Phase: phase, RecvRate: rate * 0.9, RecvMBps: rate * 0.9 / 1000, E2EP99: p99 * 3,
			Backlog: metrics.Backlog{Messages: int64(10 * s), Bytes: int64(10000 * s)}, Lag: int64(s), Gauges: map[string]float64{"partitions": 3},
			Received: int64(rate * 0.9), BytesReceived: int64(rate * 900)})
		series["mirror"] = append(series["mirror"], metrics.Point{T: t, Phase: phase, SendRate: rate / 2, RecvRate: rate / 2, P99: p99 / 2, E2EP99: p99, Lag: -1})
		extra = append(extra, metrics.ExtraPoint{T: t, Values: map[string]float64{"host.cpu": 10 * float64(s) * scale, "broker.bytes_in": 1.5e6 * scale}})
	}
	phase := func(name string, start, end float64, k float64) metrics.Phase {
		return metrics.Phase{Name: name, Start: start, End: end,
			Workloads: map[string]metrics.Stats{
				"producer": {Acked: int64(1000 * k * scale), Failed: int64(k), Rate: 250 * k * scale, SendRate: 250 * k * scale, SendMBps: 0.25 * k * scale, Latency: lat(5 * k), Lag: -1},
				"consumer": {Received: int64(900 * k * scale), Rate: 225 * k * scale, RecvRate: 225 * k * scale, RecvMBps: 0.225 * k * scale, E2E: lat(15 * k), Lag: 3},
				"mirror":   {Received: 10, Acked: 10, Rate: 0, Lag: -1},
			},
			Extra: map[string]metrics.Gauge{"host.cpu": {Avg: 20 * k * scale, Max: 40 * k * scale}, "broker.bytes_in": {Avg: 1.5 * scale, Max: 1.5 * scale}},
		}
	}
	na := metrics.NA
	naLat := metrics.Latency{Avg: na, Min: na, P50: na, P90: na, P95: na, P99: na, P999: na, Max: na}
	// A backlog phase in which the consumer, stopped, received nothing (no
	// latency, no per-second maximum; a lag measured 3.2 s before its end),
	// and a drain shorter than a second (no per-second maximum; its rate
	// from its first to its last message).
	backlog := metrics.Phase{Name: "backlog", Start: 10.5, End: 12.5, Workloads: map[string]metrics.Stats{
		"producer": {Acked: 2000, Rate: 1000, SendRate: 1000, MaxRate: 1100, MaxSendRate: 1100, SendMBps: 1, Latency: lat(6), Lag: -1, LagAge: na},
		"consumer": {Rate: 0, MaxRate: na, MaxRecvRate: na, E2E: naLat, Lag: 154204, LagAge: 3.2, Backlog: metrics.Backlog{Messages: 2000, Bytes: 2e6}},
		"mirror":   {Rate: 0, MaxRate: na, MaxSendRate: na, MaxRecvRate: na, Latency: naLat, E2E: naLat, Lag: -1, LagAge: na},
	}}
	drain := metrics.Phase{Name: "drain", Start: 12.5, End: 12.9, Workloads: map[string]metrics.Stats{
		"producer": {Acked: 61, Rate: 600, SendRate: 600, MaxRate: na, MaxSendRate: na, SendMBps: 0.6, Latency: lat(3), Lag: -1, LagAge: na},
		"consumer": {Received: 1, Rate: na, RecvRate: na, MaxRate: na, MaxRecvRate: na, RecvMBps: na, E2E: lat(9), Lag: 2061, LagAge: 0.3},
		"mirror":   {Rate: na, SendRate: na, RecvRate: na, MaxRate: na, MaxSendRate: na, MaxRecvRate: na, Latency: naLat, E2E: naLat, Lag: -1, LagAge: na},
	}}
	run.Metrics = metrics.Snapshot{
		Elapsed: 12.9,
		Order:   []string{"producer", "consumer", "mirror"},
		Phases:  []metrics.Phase{phase("warm", 0, 4.001, 1), phase("steady", 4.001, 10.5, 2), backlog, drain},
		Workloads: map[string]metrics.Stats{
			"producer": {Acked: int64(3000 * scale), Rate: 285 * scale, SendMBps: 0.285 * scale, Latency: lat(8)},
			"consumer": {Received: int64(2700 * scale), Rate: 257 * scale, RecvMBps: 0.257 * scale, E2E: lat(25)},
		},
		ExtraRun:    map[string]metrics.Gauge{"host.cpu": {Avg: 55 * scale, Max: 100}},
		Series:      series,
		ExtraSeries: extra,
		// A broker restart in the steady phase: the producer's 3 clients
		// drop at 5 s and are back by 8 s; sends time out meanwhile.
		Events: []metrics.EventCount{
			{T: 5, Workload: "producer", Event: "disconnected", Reason: "connection closed", Count: 3, Of: 3},
			{T: 6, Workload: "producer", Event: "send_error", Reason: "timeout", Count: 4},
			{T: 7, Workload: "producer", Event: "send_error", Reason: "timeout", Count: 2},
			{T: 8, Workload: "producer", Event: "reconnected", Count: 3, Of: 3},
			{T: 9, Workload: "consumer", Event: "rebalance", Reason: "3 partitions assigned", Count: 1},
		},
		Outages: []metrics.Outage{{Workload: "producer", Phase: "steady", Start: 5.2, End: 8.4, Ended: true, Clients: 3, Of: 3,
			Disconnects: 3, Reconnects: 3, Reason: "connection closed", Failed: 6, Delayed: 120}},
	}
	run.Asserts = []results.Assert{
		{Step: "step 6 (assert, plan.yaml:30)", Expr: "producer.rate > 100", Passed: true},
		{Step: "step 7 (assert, plan.yaml:31)", Expr: "consumer.e2e.p99 < 10", Message: "end-to-end p99 under 10 ms", Passed: false, Detail: "consumer.e2e.p99 = 30 (want < 10)"},
		{Step: "step 8 (assert, plan.yaml:32)", Expr: "producer.rate > 100", Passed: true},
	}
	run.Warnings = []string{`collector "broker": connection refused & <retrying>`}
	return run
}

func syntheticResult(labels []string, scale float64) *results.Result {
	res := &results.Result{Plan: "kafka-perf", File: "plans/kafka-perf.yaml", Status: results.AssertFail, Started: t0, Finished: t0.Add(time.Minute),
		Environment: results.Environment{Host: "bench1", OS: "linux", Arch: "amd64", CPUs: 2}}
	for i, l := range labels {
		r := syntheticRun(l, scale)
		r.Index = i
		res.Runs = append(res.Runs, r)
	}
	return res
}

func TestCSV(t *testing.T) {
	res := syntheticResult([]string{"size=1KB", "size=10KB"}, 1)
	res.Runs[1].Metrics.ExtraSeries = nil
	base := filepath.Join(t.TempDir(), "kafka-perf")
	path, err := CSV{}.Write(res, base)
	if err != nil {
		t.Fatal(err)
	}
	if path != base+".csv" {
		t.Errorf("path %s", path)
	}
	if got := CSVFiles(res, base); len(got) != 2 || got[1] != base+"-extra.csv" {
		t.Errorf("CSVFiles = %v", got)
	}
	for _, f := range []string{".csv", "-extra.csv"} {
		data, err := os.ReadFile(base + f)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "series"+f, data)
	}
	// Without collectors there is no extra file.
	res.Runs[0].Metrics.ExtraSeries = nil
	base2 := filepath.Join(t.TempDir(), "plain")
	if _, err := (CSV{}).Write(res, base2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(base2 + "-extra.csv"); !os.IsNotExist(err) {
		t.Errorf("extra CSV written without collected figures: %v", err)
	}
}

func TestJUnit(t *testing.T) {
	res := syntheticResult([]string{"size=1KB", "size=10KB"}, 1)
	res.Runs[1].Status = results.Failed
	res.Runs[1].Error = `step 3 (wait): timed out after 10s`
	res.Runs[1].FailedStep = "step 3 (wait)"
	res.Runs[1].Asserts = nil
	res.Status = results.Failed
	base := filepath.Join(t.TempDir(), "kafka-perf")
	path, err := JUnit{}.Write(res, base)
	if err != nil {
		t.Fatal(err)
	}
	if path != base+".junit.xml" {
		t.Errorf("path %s", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "junit.xml", data)
	var doc junitSuites
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("not valid XML: %v", err)
	}
	if doc.Tests != 5 || doc.Failures != 1 || doc.Errors != 1 || len(doc.Suites) != 2 {
		t.Errorf("counts: tests %d, failures %d, errors %d, suites %d", doc.Tests, doc.Failures, doc.Errors, len(doc.Suites))
	}
}

func TestChart(t *testing.T) {
	dir := t.TempDir()
	for _, labels := range [][]string{{""}, {"size=1KB", "size=10KB"}} {
		res := syntheticResult(labels, 1)
		base := filepath.Join(dir, "kafka-perf")
		path, err := Chart{}.Write(res, base)
		if err != nil {
			t.Fatal(err)
		}
		files := ChartFiles(res, base)
		if len(files) != len(labels) || files[0] != path {
			t.Fatalf("Write returned %s, ChartFiles %v", path, files)
		}
		if len(labels) > 1 && files[1] != base+"-run2.png" {
			t.Errorf("second chart %s", files[1])
		}
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			img, format, err := image.Decode(fh)
			fh.Close()
			if err != nil || format != "png" {
				t.Fatalf("%s: %v (format %q)", f, err, format)
			}
			b := img.Bounds()
			// Three panels of 3in by 11in at 96 dpi.
			if b.Dx() != 1056 || b.Dy() != 864 {
				t.Errorf("%s is %dx%d", f, b.Dx(), b.Dy())
			}
			if !varied(img) {
				t.Errorf("%s is blank", f)
			}
		}
	}
	// The outage is shaded: the chart differs from one without it.
	res := syntheticResult([]string{""}, 1)
	var with, without bytes.Buffer
	if err := ChartPNG(&with, "t", &res.Runs[0]); err != nil {
		t.Fatal(err)
	}
	res.Runs[0].Metrics.Outages, res.Runs[0].Metrics.Events = nil, nil
	if err := ChartPNG(&without, "t", &res.Runs[0]); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(with.Bytes(), without.Bytes()) {
		t.Error("the chart does not show the outage and the events")
	}
	// Only producers: one panel for rates, one for latency.
	res = syntheticResult([]string{""}, 1)
	res.Runs[0].Kinds = map[string]string{"producer": "produce"}
	delete(res.Runs[0].Metrics.Series, "consumer")
	delete(res.Runs[0].Metrics.Series, "mirror")
	var b bytes.Buffer
	if err := ChartPNG(&b, "producers", &res.Runs[0]); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := image.DecodeConfig(&b)
	if err != nil || cfg.Height != 2*288 {
		t.Errorf("producer-only chart: %v, height %d", err, cfg.Height)
	}
	// No series: an error that says why.
	res.Runs[0].Metrics.Series = nil
	if _, err := (Chart{}).Write(res, filepath.Join(dir, "none")); err == nil || !strings.Contains(err.Error(), "series") {
		t.Errorf("chart without series: %v", err)
	}
}

// varied says an image has more than a background: some pixels differ
// clearly from the first one.
func varied(img image.Image) bool {
	b := img.Bounds()
	r0, g0, b0, _ := img.At(b.Min.X, b.Min.Y).RGBA()
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if math.Abs(float64(r)-float64(r0))+math.Abs(float64(g)-float64(g0))+math.Abs(float64(bl)-float64(b0)) > 3000 {
				n++
			}
		}
	}
	return n > 500
}

func TestCompare(t *testing.T) {
	a := syntheticResult([]string{"size=1KB", "size=10KB"}, 1)
	b := syntheticResult([]string{"size=1KB", "size=100KB"}, 1.25)
	// A phase only in B.
	b.Runs[0].Metrics.Phases = append(b.Runs[0].Metrics.Phases, metrics.Phase{Name: "cool-down", Start: 12.9, End: 14})
	b.Runs[0].Status = results.AssertFail
	for _, tc := range []struct {
		golden  string
		all     bool
		want    []string
		notWant []string
	}{
		{golden: "compare-all.md", all: true, want: []string{
			"| warm | producer | msg/s | 250.00 | 312.50 | +25.0% |",
			"| steady | producer | failed | 2 | 2 | 0.0% |",
			"| backlog | consumer | e2e.p99 | n/a | n/a | |",
			"| warm | host.cpu | 20.00 | 25.00 | +25.0% |",
		}, notWant: []string{"| consumer | failed |", "| consumer | p99 |", "| consumer | send.p99 |", "| producer | e2e.p99 |"}},
		{golden: "compare.md", want: []string{
			"| warm | producer | msg/s | 250.00 | 312.50 | +25.0% |",
			"| warm | consumer | e2e.p99 | 15.00 | 18.75 | +25.0% |",
			"| warm | producer | send.p99 | 5.00 | 6.25 | +25.0% |",
			"| warm | host.cpu | 20.00 | 25.00 | +25.0% |",
			"- phase cool-down of run size=1KB is only in B",
			"- run size=10KB is only in A",
			"- run size=100KB is only in B",
			"(--all shows them)",
		}, notWant: []string{
			"| failed | 1 | 1 |",                                                         // unchanged
			"| backlog | producer | msg/s |",                                             // unchanged
			"| mirror | msg/s | 0.00 | 0.00 |",                                           // zero on both sides
			"| n/a |",                                                                    // n/a on a side
			"| consumer | failed |", "| consumer | send.p99 |", "| producer | e2e.p99 |", // not the role's
			"| producer | p99 |", // unlabelled
		}},
	} {
		var out bytes.Buffer
		if _, err := Compare(&out, a, b, CompareOptions{All: tc.all, Floors: DefaultFloors}); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.golden, out.Bytes())
		// Table pads cells: compare with single spaces.
		s := strings.Join(strings.Fields(out.String()), " ")
		for _, want := range tc.want {
			if !strings.Contains(s, want) {
				t.Errorf("%s: comparison lacks %q", tc.golden, want)
			}
		}
		for _, no := range tc.notWant {
			if strings.Contains(s, no) {
				t.Errorf("%s: comparison shows %q", tc.golden, no)
			}
		}
	}
	if got := changeOf(0, 5, true); got != "from 0" {
		t.Errorf("change from 0: %s", got)
	}
	if got := changeOf(-4, -2, true); got != "+50.0%" {
		t.Errorf("change from a negative value: %s", got)
	}
}

// compareResults are two one-run results of a producer and a consumer in
// phases warm and cold-read, B's figures set by the test.
func compareResults(set func(p, c *metrics.Stats)) (*results.Result, *results.Result) {
	mk := func(scale bool) *results.Result {
		var phases []metrics.Phase
		for _, name := range []string{"warm", "cold-read"} {
			p := metrics.Stats{Rate: 1000, SendMBps: 1, Failed: 0, Latency: metrics.Latency{P50: 2, P99: 10, Max: 20}}
			c := metrics.Stats{Rate: 1000, RecvMBps: 1, E2E: metrics.Latency{P50: 4, P99: 20, Max: 40}}
			if scale && name == "cold-read" {
				set(&p, &c)
			}
			phases = append(phases, metrics.Phase{Name: name, Workloads: map[string]metrics.Stats{"producer": p, "consumer": c}})
		}
		return &results.Result{Plan: "p", Status: results.Passed, Runs: []results.Run{{Status: results.Passed,
			Kinds:   map[string]string{"producer": "produce", "consumer": "consume"},
			Metrics: metrics.Snapshot{Order: []string{"producer", "consumer"}, Phases: phases}}}}
	}
	return mk(false), mk(true)
}

func TestCompareFailIf(t *testing.T) {
	worse := func(p, c *metrics.Stats) { p.Latency.P99 = 11.5; c.E2E.P99 = 21; c.Rate = 900 }
	for _, tc := range []struct {
		name  string
		set   func(p, c *metrics.Stats)
		rules []string
		fails []string // the rows named, in order
		err   string   // the error, when a rule names nothing
	}{
		{name: "p99 worse", set: worse, rules: []string{"p99 > +10%"}, fails: []string{"cold-read/producer.send.p99"}},
		// The send latency prints as send.p99; p99 is the same figure.
		{name: "send p99 worse", set: worse, rules: []string{"send.p99 > +10%"}, fails: []string{"cold-read/producer.send.p99"}},
		{name: "send p99 qualified", set: worse, rules: []string{"cold-read/producer.send.p99 > +1ms", "producer.send.max > +1ms"}, fails: []string{"cold-read/producer.send.p99"}},
		{name: "e2e within", set: worse, rules: []string{"e2e.p99 > +10%"}},
		{name: "e2e absolute", set: worse, rules: []string{"e2e.p99 > +0.5ms"}, fails: []string{"cold-read/consumer.e2e.p99"}},
		{name: "rate drop", set: worse, rules: []string{"msg/s < -5%"}, fails: []string{"cold-read/consumer.msg/s"}},
		{name: "qualified", set: worse, rules: []string{"warm/producer.p99 > +1%", "cold-read/consumer.msg/s < -11%", "producer.p99 > +2ms"}},
		{name: "workload qualified", set: worse, rules: []string{"producer.p99 > +1ms"}, fails: []string{"cold-read/producer.send.p99"}},
		{name: "from zero", set: func(p, c *metrics.Stats) { p.Failed = 3 }, rules: []string{"failed > +10%"}, fails: []string{"cold-read/producer.failed"}},
		{name: "zero to zero holds", set: func(p, c *metrics.Stats) {}, rules: []string{"failed > +10%", "failed > 0"}},
		{name: "n/a in B", set: func(p, c *metrics.Stats) { c.E2E.P99 = metrics.NA }, rules: []string{"e2e.p99 > +10%"}, fails: []string{"cold-read/consumer.e2e.p99"}},
		{name: "typo", set: worse, rules: []string{"p99 > +10%", "prodcer.p99 > +10%"}, err: `"prodcer.p99 > +10%"`},
		{name: "no send latency for consumers", set: worse, rules: []string{"consumer.p99 > +10%"}, err: "names no figure"},
		{name: "no send.p99 for consumers", set: worse, rules: []string{"consumer.send.p99 > +10%"}, err: "names no figure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := compareResults(tc.set)
			opt := CompareOptions{Floors: DefaultFloors}
			for _, r := range tc.rules {
				rule, err := ParseRule(r)
				if err != nil {
					t.Fatal(err)
				}
				opt.Rules = append(opt.Rules, rule)
			}
			var out bytes.Buffer
			breaches, err := Compare(&out, a, b, opt)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range breaches {
				got = append(got, b.Row)
				if !strings.Contains(out.String(), b.Row) {
					t.Errorf("the output does not name %s:\n%s", b.Row, out.String())
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.fails, " ") {
				t.Errorf("breaches %q, want %q\n%s", got, tc.fails, out.String())
			}
		})
	}
}

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want Rule // Text is not compared
		err  string
	}{
		{expr: "p99 > +10%", want: Rule{Figure: "p99", Greater: true, Change: 10, Percent: true}},
		{expr: "cold-read/consumer.msg/s<-5%", want: Rule{Figure: "cold-read/consumer.msg/s", Change: -5, Percent: true}},
		{expr: "producer.e2e.p99 > 2ms", want: Rule{Figure: "producer.e2e.p99", Greater: true, Change: 2, Unit: "ms"}},
		{expr: "MB/s < -0.5 MB/s", want: Rule{Figure: "MB/s", Change: -0.5, Unit: "MB/s"}},
		{expr: "failed > 0", want: Rule{Figure: "failed", Greater: true}},
		{expr: "host.cpu > +5", want: Rule{Figure: "host.cpu", Greater: true, Change: 5}},
		{expr: "p99 +10%", err: "no operator"},
		{expr: "> +10%", err: "no figure"},
		{expr: "p99 >", err: "no change"},
		{expr: "p99 >= 10%", err: "one operator"},
		{expr: "p99 > ten%", err: "not a number"},
		{expr: "p99 > +2msg/s", err: "p99 is in ms"},
		{expr: "p99 > +2", err: "p99 is in ms"},
		{expr: "msg/s < -2ms", err: "msg/s is in msg/s"},
		{expr: "failed > 2ms", err: "failed is a count"},
		{expr: "host.cpu > 2furlongs", err: "unknown unit"},
		{expr: "p 99 > 2ms", err: "has a space"},
	} {
		got, err := ParseRule(tc.expr)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one saying %q", tc.expr, err, tc.err)
			}
			continue
		}
		got.Text = ""
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.expr, got, err, tc.want)
		}
	}
}

func TestRegistered(t *testing.T) {
	for _, n := range []string{"csv", "junit", "chart"} {
		if _, ok := Lookup(n); !ok {
			t.Errorf("reporter %s not registered", n)
		}
	}
}

// The chart's legend names what each curve is: the rate of a sending
// workload is of acknowledged messages, each latency says which it is.
func TestChartLegend(t *testing.T) {
	res := syntheticResult([]string{""}, 1)
	var got []string
	for _, spec := range chartSpecs(&res.Runs[0]) {
		for _, l := range spec.lines {
			got = append(got, spec.ylabel+": "+l.name)
		}
	}
	want := []string{
		"messages/s: producer acked", "messages/s: consumer received", "messages/s: mirror acked", "messages/s: mirror received",
		"backlog (messages): consumer", "backlog (messages): mirror",
		"p99 latency (ms): producer send p99", "p99 latency (ms): consumer e2e p99", "p99 latency (ms): mirror send p99", "p99 latency (ms): mirror e2e p99",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("legend:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A result saved before the opening phase had a name (phase "") compares
// with a new one's start phase.
func TestCompareOpeningPhaseOfOlderResult(t *testing.T) {
	a := syntheticResult([]string{""}, 1)
	b := syntheticResult([]string{""}, 1.25)
	a.Runs[0].Metrics.Phases[0].Name = ""
	b.Runs[0].Metrics.Phases[0].Name = metrics.OpeningPhase
	var out bytes.Buffer
	if _, err := Compare(&out, a, b, CompareOptions{Floors: DefaultFloors}); err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(strings.Fields(out.String()), " "); !strings.Contains(s, "| start | producer | msg/s | 250.00 | 312.50 | +25.0% |") || strings.Contains(s, "is only in") {
		t.Errorf("the opening phases are not compared:\n%s", s)
	}
}
