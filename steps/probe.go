package steps

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/units"
	"github.com/planrun/planrun/yamldecode"
)

func init() {
	plan.RegisterStep(plan.StepKind{Name: "probe", Doc: "ask a target a one-off question (a Redis command such as HLEN) and keep the answer as probes.<as>", New: func() plan.Step { return &Probe{} }})
}

// Probe runs a query against a target and stores the result.
type Probe struct {
	Target  string        `yaml:"probe" required:"true" doc:"target to ask (its driver must support probes, like redis)"`
	Command []string      `yaml:"command" required:"true" doc:"the command and its arguments, such as [HLEN, messages]"`
	As      string        `yaml:"as" required:"true" doc:"name of the result in expressions and reports: probes.<as>"`
	Timeout time.Duration `yaml:"timeout" default:"10s" doc:"how long the query may take"`
}

// Check checks the target and the result name.
func (p *Probe) Check(c *plan.CheckContext) {
	if p.Target != "" {
		knownTarget(c, c.Node, "probe", p.Target)
	}
	if p.As != "" && !validIdent(p.As) {
		c.Errs.At(c.Node, "probe: as: %q must be a name of letters, digits and _ (expressions use probes.%s)", p.As, p.As)
	}
}

// KeptProbes is the probe the step keeps.
func (p *Probe) KeptProbes() []string { return []string{p.As} }

// knownTarget returns the plan's target of that name, or reports at n that
// there is none, naming the ones there are.
func knownTarget(c *plan.CheckContext, n *yaml.Node, step, name string) *plan.TargetDef {
	if t := c.Plan.Target(name); t != nil {
		return t
	}
	var names []string
	for _, t := range c.Plan.Targets {
		names = append(names, t.Name)
	}
	c.Errs.At(n, "%s: unknown target %q%s; targets are: %s", step, name, yamldecode.Suggest(name, names), strings.Join(names, ", "))
	return nil
}

func validIdent(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// Describe names the step in output.
func (p *Probe) Describe() string {
	return fmt.Sprintf("probe %s: %s -> probes.%s", p.Target, strings.Join(p.Command, " "), p.As)
}

// Run queries the target.
func (p *Probe) Run(ctx context.Context, r plan.Runtime) error {
	pr, ok := drivers.As[drivers.Prober](r.Target(p.Target))
	if !ok {
		return fmt.Errorf("probe: target %q cannot answer probes", p.Target)
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := pr.Probe(qctx, p.Command)
	if err != nil {
		return fmt.Errorf("probe %s %s: %w", p.Target, strings.Join(p.Command, " "), err)
	}
	v = numeric(v)
	r.SetProbe(p.As, v)
	r.Printf("probe %s\n", units.Labelled(p.As, v))
	return nil
}

// numeric turns integer answers into float64 so expressions compare them
// with any number; numeric strings too.
func numeric(v any) any {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case int:
		return float64(x)
	case string:
		if f, err := strconv.ParseFloat(x, 64); err == nil {
			return f
		}
	}
	return v
}
