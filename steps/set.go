package steps

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/workloads"
	"github.com/planrun/planrun/yamldecode"
)

func init() {
	plan.RegisterStep(plan.StepKind{Name: "set", Doc: "change running workloads' settings without restarting them: `set: {producer.rate: 20000}`; a rate may also be a schedule of stages, ramping from the rate in force; threads where the driver can", New: func() plan.Step { return &Set{} }})
}

// Set changes workload settings while they run.
type Set struct {
	Values SetValues `yaml:"set" required:"true" doc:"WORKLOAD.KEY: value for each change, such as producer.rate: 20000 or producer.rate: [{to: 50000, over: 1m}]; keys: a produce workload's rate and threads (threads of a running producer on drivers that take them: memory, kafka)"`
}

// SetValues are the changes a set step makes, in plan order.
type SetValues struct {
	node    *yaml.Node
	Changes []Change
}

// Change is one WORKLOAD.KEY: value of a set step.
type Change struct {
	Workload, Key string
	Value         any // decoded into the kind's Settable value
	node          *yaml.Node
}

// PlanType names the type in `planrun explain` and the README.
func (SetValues) PlanType() string { return "mapping of WORKLOAD.KEY: value" }

// PlanAlternatives is the shape of the changes, for the plan schema.
func (SetValues) PlanAlternatives() []any { return []any{map[string]any{}} }

// UnmarshalPlan keeps the mapping: values are decoded in Check, once the
// workloads' kinds are known.
func (s *SetValues) UnmarshalPlan(d *yamldecode.Decoder, n *yaml.Node) {
	s.node = n
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		d.Errs.At(n, "set: needs a mapping of WORKLOAD.KEY: value, such as set: {producer.rate: 20000}")
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		w, key, ok := strings.Cut(k.Value, ".")
		if !ok || w == "" || key == "" {
			d.Errs.At(k, "set: %q must be WORKLOAD.KEY, such as producer.rate", k.Value)
			continue
		}
		s.Changes = append(s.Changes, Change{Workload: w, Key: key, node: n.Content[i+1]})
	}
}

// Check resolves the workloads and decodes each value as its key wants.
func (s *Set) Check(c *plan.CheckContext) {
	d := yamldecode.NewDecoder(c.Errs.File, c.Plan.Vars)
	d.Errs = c.Errs
	d.Context = c.Plan.Scope
	for i := range s.Values.Changes {
		ch := &s.Values.Changes[i]
		c.CheckWorkloads([]string{ch.Workload}, "set")
		w := c.Plan.Workload(ch.Workload)
		if w == nil || w.Kind.Name == "" {
			continue
		}
		mk, ok := w.Kind.Settable[ch.Key]
		if !ok {
			keys := make([]string, 0, len(w.Kind.Settable))
			for k := range w.Kind.Settable {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			can := "nothing"
			if len(keys) > 0 {
				can = strings.Join(keys, ", ")
			}
			c.Errs.At(ch.node, "set: %s.%s: a %s workload cannot change %s while it runs; it can change: %s", ch.Workload, ch.Key, w.Kind.Name, ch.Key, can)
			continue
		}
		ch.Value = mk()
		d.Decode(ch.node, ch.Value, fmt.Sprintf("set: %s.%s", ch.Workload, ch.Key))
	}
}

// Describe names the step in output.
func (s *Set) Describe() string {
	parts := make([]string, len(s.Values.Changes))
	for i, ch := range s.Values.Changes {
		parts[i] = fmt.Sprintf("%s.%s = %v", ch.Workload, ch.Key, describeValue(ch.Value))
	}
	return "set " + strings.Join(parts, ", ")
}

func describeValue(v any) any {
	if s, ok := v.(fmt.Stringer); ok {
		return s.String()
	}
	return v
}

// Run applies the changes in order.
func (s *Set) Run(_ context.Context, r plan.Runtime) error {
	for _, ch := range s.Values.Changes {
		ws := r.Workloads([]string{ch.Workload})
		if len(ws) == 0 {
			return fmt.Errorf("set: no workload %q", ch.Workload)
		}
		st, ok := ws[0].(workloads.Setter)
		if !ok {
			return fmt.Errorf("set: workload %q cannot change settings while it runs", ch.Workload)
		}
		if err := st.Set(ch.Key, ch.Value); err != nil {
			return fmt.Errorf("set: %w", err)
		}
	}
	return nil
}
