package main

import (
	"io"
	"strings"
	"testing"

	"github.com/planrun/planrun/engine/enginetest"
)

// Over workers, the conductor has every worker flush its figures at each
// phase change and at the end: the phase rows still add up to the run.
func TestWorkersPhasesAddUpToTheRun(t *testing.T) {
	addrs, _ := startWorkers(t, 2)
	dir := t.TempDir()
	file := writePlan(t, strings.Replace(enginetest.PhaseChangesPlan(20), "name: phases", "name: wphases", 1))
	if code := run([]string{"run", "--quiet", "--workers", strings.Join(addrs, ","), "--token", "t0k", "--out", dir, file}, io.Discard, io.Discard); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	res := loadResult(t, dir, "wphases")
	enginetest.AssertPhasesAddUp(t, res)
	m := res.Runs[0].Metrics
	if p := m.Workloads["producer"]; p.Acked < 500 || len(m.Phases) < 20 {
		t.Fatalf("too little happened to show anything: acked %d, %d phases", p.Acked, len(m.Phases))
	}
}
