package engine_test

import (
	"testing"

	"github.com/planrun/planrun/engine/enginetest"
)

// Every count belongs to exactly one phase: the phase rows add up to the
// run's totals, also when phases change many times under load.
func TestPhasesAddUpToTheRun(t *testing.T) {
	res := enginetest.Execute(t, enginetest.PhaseChangesPlan(30))
	enginetest.AssertPhasesAddUp(t, res)
	m := res.Runs[0].Metrics
	p, c := m.Workloads["producer"], m.Workloads["consumer"]
	if p.Acked < 500 || p.Failed == 0 || c.Duplicates == 0 || len(m.Phases) < 30 {
		t.Fatalf("too little happened to show anything: acked %d, failed %d, duplicates %d, %d phases", p.Acked, p.Failed, c.Duplicates, len(m.Phases))
	}
}
