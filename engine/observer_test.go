package engine_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/plan"
)

// observed keeps what an observer was given; it copies nothing but the
// figures the test reads, since what Live holds is the engine's after
// Observe returns.
type observed struct {
	mu    sync.Mutex
	calls []observation
	// enough is closed once `want` observations showed the wait.
	want   int
	enough chan struct{}
}

type observation struct {
	status, runStatus, lastPhase string
	phases, points, runs         int
	acked                        int64
	progress                     []string
}

func (o *observed) Observe(l engine.Live) {
	ob := observation{status: l.Result.Status, runs: len(l.Result.Runs), progress: l.Progress}
	run := l.Result.Runs[len(l.Result.Runs)-1]
	ob.runStatus = run.Status
	ob.phases = len(run.Metrics.Phases)
	if ob.phases > 0 {
		last := run.Metrics.Phases[ob.phases-1]
		ob.lastPhase = last.Name
		ob.acked = last.Workloads["producer"].Acked
	}
	ob.points = len(run.Metrics.Series["producer"])
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, ob)
	waits := 0
	for _, c := range o.calls {
		if strings.Contains(strings.Join(c.progress, "\n"), "wait until") {
			waits++
		}
	}
	if waits == o.want {
		close(o.enough)
	}
}

// The observer is called after the per-second samples with the run going
// on: the current phase as the last row, the series so far, and the
// progress lines with the wait's distance to its target.
func TestObserverFollowsTheRun(t *testing.T) {
	y := `name: observed
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, size: 100B, rate: 1000 } }
  consumer: { consume: { topic: a, group: g } }
progress: 0s
steps:
  - start: [producer, consumer]
    phase: load
  - wait: consumer.received >= 100000000
    timeout: 5m
  - stop: all
`
	src, plans, err := plan.Parse("plan.yaml", []byte(y), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The run is interrupted once three observations showed the wait.
	obs := &observed{want: 3, enough: make(chan struct{})}
	var out bytes.Buffer
	e := &engine.Engine{Out: &out, Version: "test", Observer: obs}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-obs.enough:
		case <-time.After(2 * time.Minute):
			t.Errorf("fewer than 3 observations showed the wait in 2 minutes")
		}
		cancel()
	}()
	res := e.Execute(ctx, src, plans)
	if res.Status != "interrupted" {
		t.Fatalf("run %s: %s\n%s", res.Status, res.Error, out.String())
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	waitSeen := false
	for i, ob := range obs.calls {
		if ob.status != "running" || ob.runStatus != "running" || ob.runs != 1 {
			t.Errorf("observation %d: result %q, run %q, %d runs; want running, running, 1", i, ob.status, ob.runStatus, ob.runs)
		}
		if ob.lastPhase != "load" {
			t.Errorf("observation %d: last phase %q, want the phase going on (load)", i, ob.lastPhase)
		}
		for _, l := range ob.progress {
			if strings.Contains(l, "wait until consumer.received >= 100000000") && strings.Contains(l, "(target 100000000)") {
				waitSeen = true
			}
		}
		if i > 0 && (ob.points < obs.calls[i-1].points || ob.acked < obs.calls[i-1].acked) {
			t.Errorf("observation %d has %d points and %d acked, fewer than the one before (%d, %d)", i, ob.points, ob.acked, obs.calls[i-1].points, obs.calls[i-1].acked)
		}
	}
	last := obs.calls[len(obs.calls)-1]
	if last.points == 0 || last.acked == 0 {
		t.Errorf("last observation: %d points, %d acked; want the figures so far", last.points, last.acked)
	}
	if final := res.Runs[0].Metrics.Phases[0].Workloads["producer"].Acked; last.acked > final {
		t.Errorf("observed %d acked in the phase, more than the final %d", last.acked, final)
	}
	if !waitSeen {
		t.Errorf("no progress line shows the wait's distance to its target: %q", last.progress)
	}
}
