package runner

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/yamldecode"
)

// CheckContext is what a step's Check sees: the plan and a place for errors.
type CheckContext struct {
	Plan *Plan
	Errs *yamldecode.Errors
	Node *yaml.Node // the step's mapping
	// Phases lists every phase name the plan declares, for asserts that
	// name one.
	Phases []string
}

// Workload returns the named workload definition, or nil.
func (p *Plan) Workload(name string) *WorkloadDef {
	for _, w := range p.Workloads {
		if w.Name == name {
			return w
		}
	}
	return nil
}

// WorkloadNames lists the workloads in file order.
func (p *Plan) WorkloadNames() []string {
	names := make([]string, len(p.Workloads))
	for i, w := range p.Workloads {
		names[i] = w.Name
	}
	return names
}

// Target returns the named target definition, or nil.
func (p *Plan) Target(name string) *TargetDef {
	for _, t := range p.Targets {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Instance decodes the plan for one matrix combination.
func (s *Source) Instance(combo []KV) (*Plan, error) {
	errs := &yamldecode.Errors{File: s.File}
	vars := make(map[string]string, len(s.Vars)+len(combo))
	for k, v := range s.Vars {
		vars[k] = v
	}
	for _, kv := range combo {
		vars[kv.Name] = kv.Value
	}
	d := yamldecode.NewDecoder(s.File, vars)
	d.Errs = errs
	p := &Plan{Source: s, Combination: combo, Vars: vars, Progress: 5 * time.Second}
	p.Env = &ExprEnv{Vars: vars, Collectors: map[string][]string{}}
	d.Context = p.Env

	if n := s.keys["progress"]; n != nil {
		d.Decode(n, &p.Progress, "progress")
	}
	p.decodeTargets(d)
	p.decodeWorkloads(d)
	p.decodeCollectors(d)
	if len(p.Workloads) == 0 && len(p.Collectors) == 0 && s.keys["workloads"] == nil {
		errs.At(s.root, "the plan has no workloads:; define at least one (produce, consume or relay)")
	}
	p.decodeSteps(d)
	p.decodeReport(d)
	for k := range d.Secrets {
		s.Secrets[k] = true
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Plan) decodeTargets(d *yamldecode.Decoder) {
	n := p.keys["targets"]
	if n == nil {
		return
	}
	d.Mapping(n, "targets", func(name string, k, v *yaml.Node) {
		what := fmt.Sprintf("target %q", name)
		if v.Kind != yaml.MappingNode {
			d.Errs.At(v, "%s must be a mapping with driver: and the driver's settings", what)
			return
		}
		var g targetGeneric
		drvName := ""
		for i := 0; i+1 < len(v.Content); i += 2 {
			if v.Content[i].Value == "driver" {
				drvName, _ = d.Scalar(v.Content[i+1], what+": driver")
			}
		}
		drv, ok := drivers.Lookup(drvName)
		if !ok {
			if drvName == "" {
				d.Errs.At(v, "%s needs driver: one of %s", what, strings.Join(drivers.Names(), ", "))
			} else {
				d.Errs.At(v, "%s: unknown driver %q%s; known: %s", what, drvName, yamldecode.Suggest(drvName, drivers.Names()), strings.Join(drivers.Names(), ", "))
			}
			// Kept without a driver, so that workloads naming it are still
			// checked and no error follows from this one.
			p.Targets = append(p.Targets, &TargetDef{Name: name, Driver: drvName})
			return
		}
		cfg := drv.NewTargetConfig()
		before := d.Errs.Len()
		d.DecodeStructs(v, what, &g, cfg)
		if d.Errs.Len() == before {
			if c, ok := drv.(drivers.ConfigChecker); ok {
				if err := c.CheckConfig(cfg); err != nil {
					d.Errs.At(v, "%s: %v", what, err)
				}
			}
		}
		for topic, ts := range g.Topics {
			if ts.Partitions < 1 {
				d.Errs.At(v, "%s: topic %q needs partitions: 1 or more", what, topic)
			}
		}
		p.Targets = append(p.Targets, &TargetDef{Name: name, Driver: drvName, Config: cfg, Topics: g.Topics, drv: drv})
	})
}

func (p *Plan) targetNames() []string {
	names := make([]string, len(p.Targets))
	for i, t := range p.Targets {
		names[i] = t.Name
	}
	return names
}

// resolveTarget finds a workload's target; a plan with one target may omit it.
func (p *Plan) resolveTarget(d *yamldecode.Decoder, n *yaml.Node, name, what string) *TargetDef {
	if name == "" {
		if len(p.Targets) == 1 {
			return p.Targets[0]
		}
		if len(p.Targets) == 0 {
			d.Errs.At(n, "%s has no target to talk to: the plan has no targets:; add one, such as targets: { mq: { driver: kafka, brokers: embedded } }", what)
			return nil
		}
		d.Errs.At(n, "%s needs target: one of %s", what, strings.Join(p.targetNames(), ", "))
		return nil
	}
	t := p.Target(name)
	if t == nil {
		d.Errs.At(n, "%s: unknown target %q%s; targets are: %s", what, name, yamldecode.Suggest(name, p.targetNames()), strings.Join(p.targetNames(), ", "))
	}
	return t
}

func optioner[T any](drv drivers.Driver, f func(T) any) any {
	if o, ok := drv.(T); ok {
		return f(o)
	}
	return nil
}

func (p *Plan) decodeWorkloads(d *yamldecode.Decoder) {
	d.Mapping(p.keys["workloads"], "workloads", func(name string, k, v *yaml.Node) {
		what := fmt.Sprintf("workload %q", name)
		if reserved[name] || !validName(name) {
			d.Errs.At(k, "workload name %q is not allowed: use letters, digits and _ (expressions refer to it as %s.rate) and avoid %s", name, name, reservedList())
			return
		}
		// Named in expressions and steps whatever else is wrong with it,
		// so one mistake here does not turn into many elsewhere.
		p.Env.Workloads = append(p.Env.Workloads, name)
		var g workloadGeneric
		d.Decode(v, &g, what)
		w := &WorkloadDef{Name: name, Target: g.Target, Description: g.Description}
		// Steps check workload names against this list, so a workload with
		// errors of its own is still on it (an invalid plan never runs).
		defer func() { p.Workloads = append(p.Workloads, w) }()
		var kinds []string
		var body *yaml.Node
		for kind, node := range map[string]*yaml.Node{"produce": &g.Produce, "consume": &g.Consume, "relay": &g.Relay, "connect": &g.Connect} {
			if node.Kind != 0 {
				kinds = append(kinds, kind)
				w.Kind, body = kind, node
			}
		}
		if len(kinds) != 1 {
			sort.Strings(kinds)
			d.Errs.At(v, "%s needs exactly one of produce:, consume:, relay: or connect:%s", what, map[bool]string{true: " (it has " + strings.Join(kinds, " and ") + ")", false: ""}[len(kinds) > 1])
			return
		}
		t := p.resolveTarget(d, v, g.Target, what)
		if t == nil || t.drv == nil {
			return // the target's own error says what is wrong
		}
		w.Target = t.Name
		what = fmt.Sprintf("%s %s", what, w.Kind)
		switch w.Kind {
		case "produce", "connect":
			w.Opts = optioner(t.drv, func(o drivers.ProduceOptioner) any { return o.NewProduceOptions() })
			if w.Kind == "connect" {
				if !implementsConnector(t.drv) {
					d.Errs.At(body, "%s: driver %q cannot hold idle connections", what, t.Driver)
					return
				}
				d.DecodeStructs(body, what, w.Opts)
				break
			}
			d.DecodeStructs(body, what, &w.Produce, w.Opts)
			for _, e := range w.Produce.Check() {
				d.Errs.At(body, "%s: %s", what, e)
			}
		case "consume":
			w.Opts = optioner(t.drv, func(o drivers.ConsumeOptioner) any { return o.NewConsumeOptions() })
			d.DecodeStructs(body, what, &w.Consume, w.Opts)
			for _, e := range w.Consume.Check() {
				d.Errs.At(body, "%s: %s", what, e)
			}
		case "relay":
			var ends relayEnds
			d.DecodeStructs(body, what, &w.Relay, &ends)
			for _, e := range w.Relay.Check() {
				d.Errs.At(body, "%s: %s", what, e)
			}
			if ends.From.Kind != 0 {
				w.Opts = optioner(t.drv, func(o drivers.ConsumeOptioner) any { return o.NewConsumeOptions() })
				d.DecodeStructs(&ends.From, what+" from", &w.RelayFrom, w.Opts)
			}
			if ends.To.Kind != 0 {
				toTarget := ""
				for i := 0; i+1 < len(ends.To.Content); i += 2 {
					if ends.To.Content[i].Value == "target" {
						toTarget, _ = d.Scalar(ends.To.Content[i+1], what+" to: target")
					}
				}
				dt := t
				if toTarget != "" {
					dt = p.resolveTarget(d, &ends.To, toTarget, what+" to")
				}
				if dt == nil {
					return
				}
				w.RelayTo.Target = dt.Name
				w.ToOpts = optioner(dt.drv, func(o drivers.ProduceOptioner) any { return o.NewProduceOptions() })
				d.DecodeStructs(&ends.To, what+" to", &w.RelayTo, w.ToOpts)
				if w.RelayTo.Target == "" {
					w.RelayTo.Target = dt.Name
				}
			}
		}
		checkOptions(d, body, what, t.drv, w.Opts)
		if w.ToOpts != nil {
			checkOptions(d, body, what+" to", p.Target(w.RelayTo.Target).drv, w.ToOpts)
		}
	})
}

// checkOptions lets the driver check its options of a workload at load time.
func checkOptions(d *yamldecode.Decoder, n *yaml.Node, what string, drv drivers.Driver, opts any) {
	c, ok := drv.(drivers.ConfigChecker)
	if !ok || opts == nil {
		return
	}
	if err := c.CheckConfig(opts); err != nil {
		d.Errs.At(n, "%s: %v", what, err)
	}
}

// implementsConnector tells at load time whether a driver's targets can
// hold idle connections (drivers.Connector).
func implementsConnector(drv drivers.Driver) bool {
	c, ok := drv.(drivers.ConnectCapable)
	return ok && c.CanConnect()
}

func (p *Plan) decodeSteps(d *yamldecode.Decoder) {
	n := p.keys["steps"]
	if n == nil || yamldecode.IsNull(n) {
		d.Errs.At(p.root, "the plan has no steps:; add at least one, such as - start: all")
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.Errs.At(n, "steps must be a list (each entry starting with -)")
		return
	}
	// Phase names are collected first so an assert may name a later phase.
	var phases []string
	for _, sn := range n.Content {
		if sn.Kind != yaml.MappingNode {
			continue
		}
		for i := 0; i+1 < len(sn.Content); i += 2 {
			if k := sn.Content[i].Value; k == "phase" {
				if v, ok := d.Interpolate(sn.Content[i+1], sn.Content[i+1].Value); ok && v != "" && !contains(phases, v) {
					phases = append(phases, v)
				}
			}
		}
	}
	p.Env.Phases = phases
	for i, sn := range n.Content {
		if sn.Kind != yaml.MappingNode {
			d.Errs.At(sn, "step %d must be a mapping such as \"- start: producer\"; step kinds: %s", i+1, strings.Join(stepNames(), ", "))
			continue
		}
		var kinds []string
		var kind StepKind
		hasPhase := false
		for j := 0; j+1 < len(sn.Content); j += 2 {
			if sn.Content[j].Value == "phase" {
				hasPhase = true
				continue
			}
			if k, ok := stepKind(sn.Content[j].Value); ok {
				kinds = append(kinds, k.Name)
				kind = k
			}
		}
		// phase: is a key any step may carry, and a step of its own when
		// nothing else is there.
		if len(kinds) == 0 && hasPhase {
			kinds, kind = []string{"phase"}, StepKind{Name: "phase", New: func() Step { return &phaseStep{} }}
		}
		if len(kinds) != 1 {
			if len(kinds) > 1 {
				d.Errs.At(sn, "step %d has several kinds (%s); one step does one thing", i+1, strings.Join(kinds, ", "))
				continue
			}
			// Point at the first key that is not a common one: likely a typo.
			bad := sn
			name := ""
			for j := 0; j+1 < len(sn.Content); j += 2 {
				if k := sn.Content[j].Value; !contains([]string{"name", "phase", "if"}, k) {
					bad, name = sn.Content[j], k
					break
				}
			}
			if name != "" {
				d.Errs.At(bad, "unknown step %q%s; known: %s", name, yamldecode.Suggest(name, stepNames()), strings.Join(stepNames(), ", "))
			} else {
				d.Errs.At(sn, "step %d has no kind; known: %s", i+1, strings.Join(stepNames(), ", "))
			}
			continue
		}
		def := &StepDef{Kind: kind.Name, Step: kind.New(), Line: sn.Line, Col: sn.Column, Index: i}
		d.DecodeStructs(sn, fmt.Sprintf("step %d (%s)", i+1, kind.Name), &def.Common, def.Step)
		if c, ok := def.Step.(Checker); ok {
			c.Check(&CheckContext{Plan: p, Errs: d.Errs, Node: sn, Phases: phases})
		}
		p.Steps = append(p.Steps, def)
	}
}

// CheckWorkloads checks workload references, allowing "all".
func (c *CheckContext) CheckWorkloads(names []string, what string) {
	if len(names) == 0 {
		c.Errs.At(c.Node, "%s needs one or more workloads (or all)", what)
	}
	for _, name := range names {
		if name == "all" {
			continue
		}
		if c.Plan.Workload(name) == nil {
			known := c.Plan.WorkloadNames()
			c.Errs.At(c.Node, "%s: unknown workload %q%s; workloads are: %s, or all", what, name, yamldecode.Suggest(name, known), strings.Join(known, ", "))
		}
	}
}

// phaseStep only starts a phase (which the engine does for any step with phase:).
type phaseStep struct{}

func (*phaseStep) Run(context.Context, *Run) error { return nil }

// Describe is empty: the step's label already says which phase starts.
func (*phaseStep) Describe() string { return "" }
