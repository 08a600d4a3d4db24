package expr

import (
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/planrun/planrun/metrics"
)

// PhaseInfo is `phase` in expressions: the current phase.
type PhaseInfo struct {
	Name    string        `expr:"name"`
	Elapsed time.Duration `expr:"elapsed"`
}

// Scope is what an expression may name: it is filled while a plan loads and
// then used both to type-check expressions and to build the environment
// they run against, so the two cannot drift apart.
type Scope struct {
	Workloads []string
	// Receivers are the workloads whose backlog counts in `backlog`.
	Receivers  map[string]bool
	Collectors map[string][]string // collector name -> figure names
	Vars       map[string]string
	Phases     []string // phase names the steps declare
	// Probes are the probes (probes.<name>) the steps before the one
	// being loaded keep; an expression that reads another is an error.
	// Nil: not tracked.
	Probes []string

	varsType reflect.Type
}

// NewScope returns a scope with the plan's variables and nothing else yet.
func NewScope(vars map[string]string) *Scope {
	return &Scope{Vars: vars, Receivers: map[string]bool{}, Collectors: map[string][]string{}}
}

// Figures are the measured values an environment is built from. Missing
// workloads, phases and collector figures read as zero.
type Figures struct {
	Workloads map[string]metrics.Stats
	// Phases are each phase's figures by phase name.
	Phases  map[string]map[string]metrics.Stats
	Phase   PhaseInfo
	Elapsed time.Duration
	// Extra are collector figures by "<collector>.<figure>".
	Extra  map[string]float64
	Probes map[string]any
}

// Template is the environment of zero figures: what expressions are
// type-checked against when the plan loads.
func (s *Scope) Template() map[string]any { return s.Env(Figures{}) }

// Env is the environment an expression evaluates against. Every declared
// name is present (an assert on a phase that never ran fails on its
// numbers, not on a missing key), with the types Template gives.
func (s *Scope) Env(f Figures) map[string]any {
	probes := f.Probes
	if probes == nil {
		probes = map[string]any{}
	}
	env := map[string]any{
		"vars":    s.varsValue(),
		"probes":  probes,
		"search":  searches(probes),
		"phase":   f.Phase,
		"elapsed": f.Elapsed,
	}
	var total metrics.Backlog
	for _, w := range s.Workloads {
		st := f.Workloads[w]
		env[w] = st
		if s.Receivers[w] {
			total.Messages += st.Backlog.Messages
			total.Bytes += st.Backlog.Bytes
		}
	}
	env["backlog"] = total
	phases := make(map[string]map[string]metrics.Stats, len(s.Phases))
	for _, p := range s.Phases {
		phases[p] = map[string]metrics.Stats{}
	}
	for p, ws := range f.Phases {
		phases[p] = ws
	}
	env["phases"] = phases
	extra := make(map[string]float64, len(f.Extra))
	env["extra"] = extra
	for c, figs := range s.Collectors {
		m := make(map[string]float64, len(figs))
		for _, fig := range figs {
			m[fig] = 0
		}
		env[c] = m
	}
	// Collector figures "host.cpu" also read as host.cpu.
	for k, v := range f.Extra {
		extra[k] = v
		c, fig, ok := strings.Cut(k, ".")
		if !ok {
			continue
		}
		if m, ok := env[c].(map[string]float64); ok {
			m[fig] = v
		}
	}
	return env
}

// SearchPrefix starts the probe names under which search steps keep their
// results: probes "search.NAME" read as search.NAME in expressions.
const SearchPrefix = "search."

// searches gathers the search steps' results, kept among the probes, as
// search.NAME.FIGURE.
func searches(probes map[string]any) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for k, v := range probes {
		name, ok := strings.CutPrefix(k, SearchPrefix)
		if !ok {
			continue
		}
		figs := map[string]float64{}
		switch m := v.(type) {
		case map[string]float64:
			for f, x := range m {
				figs[f] = x
			}
		case map[string]any: // read back from a report
			for f, x := range m {
				if n, ok := x.(float64); ok {
					figs[f] = n
				}
			}
		}
		out[name] = figs
	}
	return out
}

// varsValue gives expressions the variables as a struct, so that a
// misspelt vars.name fails when the plan loads: numbers where a value is a
// number, strings otherwise.
func (s *Scope) varsValue() any {
	if s.varsType == nil {
		names := make([]string, 0, len(s.Vars))
		for k := range s.Vars {
			names = append(names, k)
		}
		sort.Strings(names)
		fields := make([]reflect.StructField, 0, len(names))
		for _, k := range names {
			t := reflect.TypeOf("")
			if _, err := strconv.ParseFloat(s.Vars[k], 64); err == nil {
				t = reflect.TypeOf(0.0)
			}
			fields = append(fields, reflect.StructField{Name: "V" + k, Type: t, Tag: reflect.StructTag(`expr:"` + k + `"`)})
		}
		s.varsType = reflect.StructOf(fields)
	}
	v := reflect.New(s.varsType).Elem()
	for i := 0; i < s.varsType.NumField(); i++ {
		f := s.varsType.Field(i)
		raw := s.Vars[f.Tag.Get("expr")]
		if f.Type.Kind() == reflect.Float64 {
			x, _ := strconv.ParseFloat(raw, 64)
			v.Field(i).SetFloat(x)
		} else {
			v.Field(i).SetString(raw)
		}
	}
	return v.Interface()
}

// reserved names cannot be workload, collector or probe names because
// expressions use them.
var reserved = map[string]bool{"phase": true, "phases": true, "elapsed": true, "backlog": true, "vars": true,
	"probes": true, "search": true, "size": true, "mb": true, "mib": true, "extra": true, "true": true, "false": true, "nil": true,
	"all": true, "run": true}

// Reserved reports whether name is one expressions use themselves.
func Reserved(name string) bool { return reserved[name] }

// ReservedList lists the reserved names for error messages.
func ReservedList() string {
	names := make([]string, 0, len(reserved))
	for k := range reserved {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
