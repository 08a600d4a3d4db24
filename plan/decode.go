package plan

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/expr"
	"github.com/planrun/planrun/units"
	"github.com/planrun/planrun/workloads"
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
	// NotRun is set when the step's if: is false for the plan's variables
	// (such as vars.mqtt_url == "embedded" with a real broker's URL): the
	// step will not run, so it is checked for its own mistakes (names,
	// values) but not refused for what it would do to the targets as
	// these variables configure them.
	NotRun bool
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
	d.LookupEnv = s.lookupEnv
	p := &Plan{Source: s, Combination: combo, Vars: vars, Progress: 5 * time.Second}
	p.Scope = expr.NewScope(vars)
	d.Context = p.Scope

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
		var g TargetGeneric
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
		if _, ok := cfg.(drivers.Routable); g.Proxy.On && !ok {
			d.Errs.At(keyNode(v, "proxy"), "%s: proxy: the %s driver has no network connections to put a proxy in front of; remove proxy:", what, drvName)
		}
		p.Targets = append(p.Targets, &TargetDef{Name: name, Driver: drvName, Config: cfg, Topics: g.Topics, Proxy: g.Proxy, drv: drv})
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

// workloadKeys makes the struct a workload mapping decodes into: the
// generic keys (WorkloadGeneric's fields first) and a YAML node per
// registered workload kind, so unknown keys are reported with every known one.
func workloadKeys() (reflect.Value, []workloads.Kind) {
	kinds := workloads.Kinds()
	gt := reflect.TypeOf(WorkloadGeneric{})
	var fields []reflect.StructField
	for i := 0; i < gt.NumField(); i++ {
		fields = append(fields, gt.Field(i))
	}
	for i, k := range kinds {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("Kind%d", i), Type: reflect.TypeOf(yaml.Node{}),
			Tag: reflect.StructTag(fmt.Sprintf(`yaml:%q doc:%q`, k.Name, k.Doc))})
	}
	return reflect.New(reflect.StructOf(fields)), kinds
}

func (p *Plan) decodeWorkloads(d *yamldecode.Decoder) {
	d.Mapping(p.keys["workloads"], "workloads", func(name string, k, v *yaml.Node) {
		what := fmt.Sprintf("workload %q", name)
		if expr.Reserved(name) || !validName(name) {
			d.Errs.At(k, "workload name %q is not allowed: use letters, digits and _ (expressions refer to it as %s.rate) and avoid %s", name, name, expr.ReservedList())
			return
		}
		// Named in expressions and steps whatever else is wrong with it,
		// so one mistake here does not turn into many elsewhere.
		p.Scope.Workloads = append(p.Scope.Workloads, name)
		keys, kinds := workloadKeys()
		d.Decode(v, keys.Interface(), what)
		kv := keys.Elem()
		g := WorkloadGeneric{Target: kv.Field(0).String(), Description: kv.Field(1).String()}
		w := &WorkloadDef{Name: name, Target: g.Target, Description: g.Description}
		if on := kv.Field(2).Addr().Interface().(*yaml.Node); on.Kind != 0 {
			w.On = decodePlacement(d, on, what)
		}
		// Steps check workload names against this list, so a workload with
		// errors of its own is still on it (an invalid plan never runs).
		defer func() { p.Workloads = append(p.Workloads, w) }()
		var found []string
		var body *yaml.Node
		for i, kind := range kinds {
			if node := kv.Field(reflect.TypeOf(g).NumField() + i).Addr().Interface().(*yaml.Node); node.Kind != 0 {
				found = append(found, kind.Name)
				w.Kind, body = kind, node
			}
		}
		if len(found) != 1 {
			sort.Strings(found)
			var names []string
			for _, kind := range kinds {
				names = append(names, kind.Name+":")
			}
			list := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
			d.Errs.At(v, "%s needs exactly one of %s%s", what, list, map[bool]string{true: " (it has " + strings.Join(found, " and ") + ")", false: ""}[len(found) > 1])
			return
		}
		if w.Kind.Role.Receives {
			p.Scope.Receivers[name] = true
		}
		t := p.resolveTarget(d, v, w.Target, what)
		if t == nil || t.drv == nil {
			return // the target's own error says what is wrong
		}
		w.Target = t.Name
		sec := w.Kind.New()
		before := d.Errs.Len()
		sec.Decode(&workloads.Decoding{D: d, Node: body, What: fmt.Sprintf("%s %s", what, w.Kind.Name), Target: t.endpoint(),
			Resolve: func(n *yaml.Node, name, what string) (workloads.Endpoint, bool) {
				dt := p.resolveTarget(d, n, name, what)
				if dt == nil {
					return workloads.Endpoint{}, false
				}
				return dt.endpoint(), true
			}})
		if d.Errs.Len() == before {
			w.Section = sec
		}
	})
}

func (t *TargetDef) endpoint() workloads.Endpoint {
	return workloads.Endpoint{Name: t.Name, DriverName: t.Driver, Driver: t.drv}
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
	p.Scope.Phases = phases
	// Expressions may read the probes of earlier steps only.
	p.Scope.Probes = []string{}
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
			if k, ok := LookupStep(sn.Content[j].Value); ok {
				kinds = append(kinds, k.Name)
				kind = k
			}
		}
		if len(kinds) > 1 {
			kinds, kind = ownKind(kinds, kind)
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
		def := &StepDef{Kind: kind.Name, Step: kind.New(), File: d.Errs.File, Line: sn.Line, Col: sn.Column, Index: i}
		d.DecodeStructs(sn, stepLabel(i, stepName(sn), kind.Name), &def.Common, def.Step)
		notRun := false
		if def.If != nil {
			v, known := def.If.AtLoad(p.Scope)
			notRun = known && !v
		}
		if c, ok := def.Step.(Checker); ok {
			c.Check(&CheckContext{Plan: p, Errs: d.Errs, Node: sn, Phases: phases, NotRun: notRun})
		}
		if k, ok := def.Step.(ProbeKeeper); ok {
			for _, name := range k.KeptProbes() {
				if name != "" && !contains(p.Scope.Probes, name) {
					p.Scope.Probes = append(p.Scope.Probes, name)
				}
			}
		}
		p.Steps = append(p.Steps, def)
	}
}

// ownKind settles a step whose keys name several kinds when one of those
// kinds has the others as keys of its own (restart's pause: is not the
// pause step): that kind is the step's. Otherwise kinds stay as found.
func ownKind(kinds []string, last StepKind) ([]string, StepKind) {
	for _, name := range kinds {
		k, _ := LookupStep(name)
		own := yamldecode.Fields(k.New())
		if !slices.ContainsFunc(kinds, func(o string) bool { return o != name && !contains(own, o) }) {
			return []string{name}, k
		}
	}
	return kinds, last
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

func (*phaseStep) Run(context.Context, Runtime) error { return nil }

// Describe is empty: the step's label already says which phase starts.
func (*phaseStep) Describe() string { return "" }

// decodePlacement reads a workload's on: all, a worker count, or a list of
// worker indexes.
func decodePlacement(d *yamldecode.Decoder, n *yaml.Node, what string) Placement {
	var p Placement
	if n.Kind == yaml.SequenceNode {
		d.Decode(n, &p.Indexes, what+": on")
		seen := map[int]bool{}
		for _, i := range p.Indexes {
			if i < 0 || seen[i] {
				d.Errs.At(n, "%s: on: worker indexes must be distinct numbers from 0, got %s", what, units.Value(p.Indexes))
				break
			}
			seen[i] = true
		}
		if len(p.Indexes) == 0 {
			d.Errs.At(n, "%s: on: the list of worker indexes is empty", what)
		}
		return p
	}
	v, _ := d.Scalar(n, what+": on")
	if v == "all" {
		return p
	}
	c, err := strconv.Atoi(v)
	if err != nil || c < 1 {
		d.Errs.At(n, "%s: on: want all, a number of workers (1 or more) or a list of worker indexes such as [0, 2], got %q", what, v)
		return p
	}
	p.Count = c
	return p
}

// keyNode returns the value of key in mapping n, or n when it has none.
func keyNode(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return n
}

// stepName is the name: a step's mapping gives, for messages about it.
func stepName(sn *yaml.Node) string {
	for j := 0; j+1 < len(sn.Content); j += 2 {
		if v := sn.Content[j+1]; sn.Content[j].Value == "name" && v.Kind == yaml.ScalarNode {
			return v.Value
		}
	}
	return ""
}
