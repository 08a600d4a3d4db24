package main

import (
	"context"
	"github.com/planrun/planrun/engine/enginetest"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/planrun/planrun/cluster"
	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/reporters"
	"github.com/planrun/planrun/results"
)

// A cold-read plan on one Kafka broker (kfake) with producers on three
// worker processes and the consumer group on one: the merged counts are the
// plan's, nothing is lost, and the merged percentiles are those of the
// workers' own histograms merged here by hdrhistogram itself.
func TestWorkersColdReadMergesExactly(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(6))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	addrs, _ := startWorkers(t, 3)
	text := `name: coldread
vars:
  brokers: x
targets:
  kafka: { driver: kafka, brokers: "${brokers}", topics: { cold: { partitions: 6 } } }
workloads:
  producer:
    produce: { topic: cold, size: 1KiB, threads: 6, rate: 3000, count: 9000 }
  consumer:
    on: [2]
    consume: { topic: cold, group: cold-group, consumers: 2 }
progress: 0s
steps:
  - start: producer
    phase: backlog
  - wait: "!producer.running"
    timeout: 60s
  - start: consumer
    phase: cold-read
  - wait: consumer.backlog.messages == 0 && consumer.received >= 9000
    timeout: 60s
  - stop: consumer
  - assert: consumer.lost == 0
`
	set := map[string]string{"brokers": strings.Join(kc.ListenAddrs(), ",")}
	src, plans, err := plan.Parse("coldread.yaml", []byte(text), plan.Options{Set: set, Formats: reporters.Names()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	merged := map[string][2]*hdr.Histogram{}
	add := func(name string, i int, b []byte) {
		if len(b) == 0 {
			return
		}
		h, err := hdr.Decode(b)
		if err != nil {
			t.Error(err)
			return
		}
		hs := merged[name]
		if hs[i] == nil {
			hs[i] = hdr.New(1, int64(time.Hour/time.Microsecond), 3)
		}
		hs[i].Merge(h)
		merged[name] = hs
	}
	cond := &cluster.Conductor{Addrs: addrs, Token: "t0k", Version: version, File: "coldread.yaml", Source: []byte(text), Set: set,
		OnFigures: func(_ int, f *cluster.Figures) {
			mu.Lock()
			defer mu.Unlock()
			for name, sf := range f.Workloads {
				add(name, 0, sf.Delta.Send)
				add(name, 1, sf.Delta.E2E)
			}
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cond.Join(ctx); err != nil {
		t.Fatal(err)
	}
	defer cond.Close()
	eng := &engine.Engine{Out: io.Discard, Version: version, Remote: cond}
	res := eng.Execute(ctx, src, plans)
	enginetest.CheckResult(t, res)
	if res.Status != results.Passed {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	run := res.Runs[0]
	p, c := run.Metrics.Workloads["producer"], run.Metrics.Workloads["consumer"]
	if p.Acked != 9000 || c.Received != 9000 || c.Lost != 0 || c.Duplicates != 0 {
		t.Errorf("acked %d received %d lost %d duplicates %d: want 9000, 9000, 0, 0", p.Acked, c.Received, c.Lost, c.Duplicates)
	}
	mu.Lock()
	defer mu.Unlock()
	for name, st := range map[string]metrics.Stats{"producer": p, "consumer": c} {
		for i, got := range []metrics.Latency{st.Latency, st.E2E} {
			want := metrics.Summarize(merged[name][i])
			if got != want {
				t.Errorf("%s histogram %d: report %+v, workers' histograms merged here %+v", name, i, got, want)
			}
		}
	}
	if c.E2E.Count != 9000 || p.Latency.Count != 9000 {
		t.Errorf("latency counts %d and %d, want 9000", p.Latency.Count, c.E2E.Count)
	}
	for _, w := range run.Workers {
		if w.Index == 2 && !strings.Contains(strings.Join(w.Workloads, ","), "consumer") {
			t.Errorf("worker 2 ran %v, want the consumer", w.Workloads)
		}
	}
	// The same plan in one process gives the same counts.
	res1 := (&engine.Engine{Out: io.Discard, Version: version}).Execute(ctx, src, plans)
	if r := res1.Runs[0].Metrics.Workloads; res1.Status != results.Passed || r["producer"].Acked != p.Acked || r["consumer"].Received != c.Received {
		t.Errorf("one process: status %s, acked %d received %d", res1.Status, r["producer"].Acked, r["consumer"].Received)
	}
}
