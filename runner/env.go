package runner

import (
	"fmt"
	"strings"
	"time"

	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

// Env is the expression environment now: one consistent snapshot.
func (r *Run) Env() map[string]any {
	now := time.Now()
	snap := r.coll.Snapshot(now, false)
	r.mu.Lock()
	phase := PhaseInfo{Name: r.phase, Elapsed: now.Sub(r.phaseAt)}
	probes := make(map[string]any, len(r.probes))
	for k, v := range r.probes {
		probes[k] = v
	}
	r.mu.Unlock()
	env := baseEnv(r.Plan, snap.Workloads, probes)
	env["phase"] = phase
	env["elapsed"] = time.Duration(snap.Elapsed * float64(time.Second))
	phases := env["phases"].(map[string]map[string]metrics.Stats)
	for _, p := range snap.Phases {
		phases[p.Name] = p.Workloads
	}
	if snap.Phase.Name != "" {
		phases[snap.Phase.Name] = snap.Phase.Workloads
	}
	addExtra(env, snap.Extra)
	return env
}

// baseEnv fills what every environment has: workloads, backlog, vars,
// probes, and every declared phase (empty until it runs) so that an assert
// on a phase that never ran fails on its numbers, not on a missing key.
func baseEnv(p *Plan, ws map[string]metrics.Stats, probes map[string]any) map[string]any {
	env := map[string]any{
		"vars":    p.Env.varsValue(p.Vars),
		"probes":  probes,
		"phase":   PhaseInfo{},
		"elapsed": time.Duration(0),
	}
	var total metrics.Backlog
	for _, w := range p.Workloads {
		st := ws[w.Name]
		env[w.Name] = st
		if w.Kind == "consume" || w.Kind == "relay" {
			total.Messages += st.Backlog.Messages
			total.Bytes += st.Backlog.Bytes
		}
	}
	env["backlog"] = total
	phases := map[string]map[string]metrics.Stats{}
	for _, s := range p.Steps {
		if s.Phase != "" {
			phases[s.Phase] = map[string]metrics.Stats{}
		}
	}
	env["phases"] = phases
	extra := map[string]float64{}
	env["extra"] = extra
	for c, figs := range p.Env.Collectors {
		m := map[string]float64{}
		for _, f := range figs {
			m[f] = 0
		}
		env[c] = m
	}
	return env
}

// addExtra puts collector figures "host.cpu" under env["host"]["cpu"].
func addExtra(env map[string]any, extra map[string]float64) {
	for k, v := range extra {
		env["extra"].(map[string]float64)[k] = v
		c, fig, ok := strings.Cut(k, ".")
		if !ok {
			continue
		}
		if m, ok := env[c].(map[string]float64); ok {
			m[fig] = v
		}
	}
}

// phaseEnv is the environment of a report row for one phase: workload
// figures are the phase's, collector figures its averages.
func phaseEnv(p *Plan, run *results.Run, ph metrics.Phase) map[string]any {
	env := baseEnv(p, ph.Workloads, run.Probes)
	env["phase"] = PhaseInfo{Name: ph.Name, Elapsed: time.Duration(ph.Duration() * float64(time.Second))}
	env["elapsed"] = time.Duration(ph.End * float64(time.Second))
	fillPhases(env, run)
	avg := map[string]float64{}
	for k, g := range ph.Extra {
		avg[k] = g.Avg
		avg[k+"_max"] = g.Max
	}
	addExtra(env, avg)
	return env
}

// runEnv is the environment of a report row for a whole run.
func runEnv(p *Plan, run *results.Run) map[string]any {
	env := baseEnv(p, run.Metrics.Workloads, run.Probes)
	env["elapsed"] = time.Duration(run.Metrics.Elapsed * float64(time.Second))
	fillPhases(env, run)
	avg := map[string]float64{}
	for k, g := range run.Metrics.ExtraRun {
		avg[k] = g.Avg
		avg[k+"_max"] = g.Max
	}
	addExtra(env, avg)
	return env
}

func fillPhases(env map[string]any, run *results.Run) {
	phases := env["phases"].(map[string]map[string]metrics.Stats)
	for _, ph := range run.Metrics.Phases {
		phases[ph.Name] = ph.Workloads
	}
}

// buildTables evaluates the plans' own tables over all runs.
func buildTables(plans []*Plan, runs []results.Run) []results.Table {
	first := plans[0]
	var out []results.Table
	matrix := len(plans) > 1
	for ti, ts := range first.Report.Tables {
		t := results.Table{Title: ts.Title, Transpose: ts.Transpose}
		if t.Title == "" {
			t.Title = fmt.Sprintf("Table %d", ti+1)
		}
		if matrix {
			for _, kv := range first.Combination {
				t.Columns = append(t.Columns, kv.Name)
			}
		}
		if ts.Rows == "phases" {
			t.Columns = append(t.Columns, "phase")
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
			if spec.Rows == "runs" {
				t.Rows = append(t.Rows, append(prefix, cells(spec, runEnv(p, run))...))
				continue
			}
			for _, ph := range run.Metrics.Phases {
				if len(spec.Phases) > 0 && !contains(spec.Phases, ph.Name) {
					continue
				}
				row := append(append([]string{}, prefix...), phaseLabel(ph.Name))
				t.Rows = append(t.Rows, append(row, cells(spec, phaseEnv(p, run, ph))...))
			}
		}
		out = append(out, t)
	}
	return out
}

func phaseLabel(name string) string {
	if name == "" {
		return "(before first phase)"
	}
	return name
}

func cells(spec TableSpec, env map[string]any) []string {
	out := make([]string, len(spec.Columns))
	for i, c := range spec.Columns {
		v, err := c.Value.Eval(env)
		if err != nil {
			out[i] = "error: " + err.Error()
			continue
		}
		out[i] = FormatCell(c.Format, v)
	}
	return out
}
