package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/planrun/planrun/expr"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/results"
)

// Env is the expression environment now: one consistent snapshot.
func (r *Run) Env() map[string]any {
	now := time.Now()
	snap := r.coll.Snapshot(now, false)
	r.mu.Lock()
	f := expr.Figures{
		Workloads: snap.Workloads,
		Phase:     expr.PhaseInfo{Name: r.phase, Elapsed: now.Sub(r.phaseAt)},
		Elapsed:   time.Duration(snap.Elapsed * float64(time.Second)),
		Extra:     snap.Extra,
		Probes:    maps.Clone(r.probes),
		Phases:    map[string]map[string]metrics.Stats{},
	}
	r.mu.Unlock()
	for _, p := range snap.Phases {
		f.Phases[p.Name] = p.Workloads
	}
	if snap.Phase.Name != "" {
		f.Phases[snap.Phase.Name] = snap.Phase.Workloads
	}
	return r.Plan.Scope.Env(f)
}

// runFigures are what every report row of a run sees: its probes and the
// figures of each of its phases.
func runFigures(run *results.Run) expr.Figures {
	f := expr.Figures{Probes: run.Probes, Phases: map[string]map[string]metrics.Stats{}}
	for _, ph := range run.Metrics.Phases {
		f.Phases[ph.Name] = ph.Workloads
	}
	return f
}

// averages turns collector figures over a window into what report rows
// show: the average, and the peak as <figure>_max.
func averages(gauges map[string]metrics.Gauge) map[string]float64 {
	avg := make(map[string]float64, 2*len(gauges))
	for k, g := range gauges {
		avg[k] = g.Avg
		avg[k+"_max"] = g.Max
	}
	return avg
}

// phaseEnv is the environment of a report row for one phase: workload
// figures are the phase's, collector figures its averages.
func phaseEnv(p *plan.Plan, run *results.Run, ph metrics.Phase) map[string]any {
	f := runFigures(run)
	f.Workloads = ph.Workloads
	f.Phase = expr.PhaseInfo{Name: ph.Name, Elapsed: time.Duration(ph.Duration() * float64(time.Second))}
	f.Elapsed = time.Duration(ph.End * float64(time.Second))
	f.Extra = averages(ph.Extra)
	return p.Scope.Env(f)
}

// runEnv is the environment of a report row for a whole run.
func runEnv(p *plan.Plan, run *results.Run) map[string]any {
	f := runFigures(run)
	f.Workloads = run.Metrics.Workloads
	f.Elapsed = time.Duration(run.Metrics.Elapsed * float64(time.Second))
	f.Extra = averages(run.Metrics.ExtraRun)
	return p.Scope.Env(f)
}

// buildTables evaluates the plans' own tables over all runs. A table's
// leading columns name its rows: the matrix variables' values, then the
// phase. A transposed table has one such column instead, headed figure
// (what its rows become) and holding each column's heading once
// transposed: the run's label and the phase, or value for the one run of
// a plan without a matrix.
func buildTables(plans []*plan.Plan, runs []results.Run) []results.Table {
	first := plans[0]
	var out []results.Table
	matrix := len(plans) > 1
	for ti, ts := range first.Report.Tables {
		t := results.Table{Title: ts.Title, Transpose: ts.Transpose}
		if t.Title == "" {
			t.Title = fmt.Sprintf("Table %d", ti+1)
		}
		switch {
		case ts.Transpose:
			t.Columns = append(t.Columns, "figure")
		default:
			if matrix {
				for _, kv := range first.Combination {
					t.Columns = append(t.Columns, kv.Name)
				}
			}
			if ts.Rows == "phases" {
				t.Columns = append(t.Columns, "phase")
			}
		}
		for _, c := range ts.Columns {
			t.Columns = append(t.Columns, c.Name)
		}
		for ri := range runs {
			run := &runs[ri]
			p := plans[run.Index]
			spec := p.Report.Tables[ti]
			var prefix []string
			if matrix {
				for _, kv := range p.Combination {
					prefix = append(prefix, kv.Value)
				}
			}
			// key is the leading cells of a row for phase (none for a
			// row per run).
			key := func(phase *string) []string {
				if !ts.Transpose {
					if phase == nil {
						return prefix
					}
					return append(append([]string{}, prefix...), *phase)
				}
				var parts []string
				if matrix {
					parts = append(parts, plan.Label(p.Combination))
				}
				if phase != nil {
					parts = append(parts, *phase)
				}
				if len(parts) == 0 {
					parts = append(parts, "value")
				}
				return []string{strings.Join(parts, " ")}
			}
			if spec.Rows == "runs" {
				t.Rows = append(t.Rows, append(key(nil), cells(spec, runEnv(p, run))...))
				continue
			}
			for _, ph := range run.Metrics.Phases {
				if len(spec.Phases) > 0 && !slices.Contains(spec.Phases, ph.Name) {
					continue
				}
				name := metrics.PhaseLabel(ph.Name)
				t.Rows = append(t.Rows, append(key(&name), cells(spec, phaseEnv(p, run, ph))...))
			}
		}
		out = append(out, t)
	}
	return out
}

func cells(spec plan.TableSpec, env map[string]any) []string {
	out := make([]string, len(spec.Columns))
	for i, c := range spec.Columns {
		v, err := c.Value.Eval(env)
		if err != nil && c.Value.EmptyProbe(env) != "" {
			continue // over a probe whose step was skipped: empty
		}
		if err != nil {
			out[i] = "error: " + err.Error()
			continue
		}
		out[i] = expr.FormatCell(c.Format, v)
	}
	return out
}
