// Package plan is the plan model and its loading: a plan file read,
// checked and decoded for each matrix combination, with the registries of
// step and collector kinds. Nothing here contacts a broker.
package plan

import (
	"context"
	"fmt"
	"net"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/expr"
	"github.com/planrun/planrun/netfault"
	"github.com/planrun/planrun/workloads"
	"github.com/planrun/planrun/yamldecode"
)

// Source is a plan file read and checked once; Instance decodes it for one
// matrix combination (variables differ per combination, so everything that
// interpolates them is decoded per combination).
type Source struct {
	File        string
	Name        string
	Description string
	root        *yaml.Node
	keys        map[string]*yaml.Node // top-level key -> value node
	VarOrder    []string
	Vars        map[string]string // defaults with --set applied, env interpolated
	Matrix      []MatrixVar
	Secrets     map[string]bool
	// Workers are the worker processes (host:port) the plan runs on, from
	// its workers: key; empty: the plan runs in this process.
	Workers []string
	formats []string // report formats the binary offers (nil: not checked)
	// lookupEnv resolves ${env:NAME} in every matrix instance as in vars:
	// (nil: the process environment).
	lookupEnv func(string) (string, bool)
}

// MatrixVar is one matrix variable and its values, in file order.
type MatrixVar struct {
	Name   string
	Values []string
}

// KV is one variable value of a matrix combination.
type KV struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Plan is a plan decoded for one combination of the matrix.
type Plan struct {
	*Source
	Combination []KV
	Vars        map[string]string
	Targets     []*TargetDef
	Workloads   []*WorkloadDef
	Steps       []*StepDef
	Report      ReportSpec
	Progress    time.Duration
	Collectors  []*CollectorDef
	// Scope is what expressions may name; the engine builds their
	// environment from it.
	Scope *expr.Scope
}

// TargetDef is a plan's target.
type TargetDef struct {
	Name   string
	Driver string
	Config any
	Topics map[string]TopicSpec
	// Proxy puts an in-process proxy between the target's clients and its
	// brokers (proxy:), for network faults.
	Proxy netfault.Spec
	drv   drivers.Driver
}

// Open connects the target (or starts its embedded broker). A target with
// proxy: gets a proxy of its own for this opening, which its clients dial
// through and which closes with it (drivers.RouterOf finds it).
func (t *TargetDef) Open(ctx context.Context) (drivers.Target, error) {
	if !t.Proxy.On {
		return t.drv.Open(ctx, t.Config)
	}
	// A copy of the config holds the proxy, so that every opening (every
	// run, every worker) has a proxy of its own.
	cv := reflect.ValueOf(t.Config)
	cfg := reflect.New(cv.Elem().Type())
	cfg.Elem().Set(cv.Elem())
	r, ok := cfg.Interface().(drivers.Routable)
	if !ok {
		return nil, fmt.Errorf("driver %s cannot be reached through a proxy", t.Driver)
	}
	link := netfault.New(t.Proxy.Condition())
	r.SetRouter(link)
	tg, err := t.drv.Open(ctx, cfg.Interface())
	if err != nil {
		_ = link.Close()
		return nil, err
	}
	return drivers.WithRouter(tg, link), nil
}

// TopicSpec is a topic the run creates before its steps.
type TopicSpec struct {
	Partitions int `yaml:"partitions" doc:"partitions (Kafka) or queues (RocketMQ) to create the topic with"`
}

// TargetGeneric are a target's keys besides its driver's own.
type TargetGeneric struct {
	Driver string               `yaml:"driver" required:"true" doc:"protocol driver"`
	Topics map[string]TopicSpec `yaml:"topics" doc:"topics to create before the steps run, with their partition (queue) counts"`
	Proxy  netfault.Spec        `yaml:"proxy" doc:"true: the clients reach the brokers through an in-process proxy (toxiproxy) on loopback, so that network steps can degrade the link; a mapping also sets the link's condition for the whole run (see the network step)"`
}

// WorkloadDef is a plan's workload.
type WorkloadDef struct {
	Name        string
	Target      string
	Kind        workloads.Kind
	Description string
	// Section is the decoded kind section (produce:, consume:...); nil when
	// it had errors of its own.
	Section workloads.Section
	// On is where the workload runs when the plan runs on workers.
	On Placement
}

// Placement says which worker processes run a workload: all of them
// (the default), the first Count, or the workers of the given indexes.
type Placement struct {
	Count   int
	Indexes []int
}

// Workers lists the indexes of the n workers the placement picks, or an
// error naming what does not fit.
func (p Placement) Workers(n int) ([]int, error) {
	var out []int
	switch {
	case len(p.Indexes) > 0:
		for _, i := range p.Indexes {
			if i >= n {
				return nil, fmt.Errorf("on: worker %d does not exist: there are %d workers, numbered 0 to %d", i, n, n-1)
			}
		}
		out = append(out, p.Indexes...)
	case p.Count > 0:
		if p.Count > n {
			return nil, fmt.Errorf("on: %d workers asked for, there are %d", p.Count, n)
		}
		for i := range p.Count {
			out = append(out, i)
		}
	default:
		for i := range n {
			out = append(out, i)
		}
	}
	return out, nil
}

// WorkloadGeneric are the keys of a workload besides its kind section.
type WorkloadGeneric struct {
	Target      string    `yaml:"target" doc:"the target this workload talks to (may be left out when the plan has one target)"`
	Description string    `yaml:"description" doc:"free text, shown in reports"`
	On          yaml.Node `yaml:"on" type:"all, number or list of numbers" default:"all" doc:"where the workload runs when the plan runs on workers: all, a number of workers (the first N), or a list of worker indexes such as [0, 2]"`
}

// StepDef is one step with the keys every step may carry.
type StepDef struct {
	Common
	Kind      string
	Step      Step
	File      string // the plan file, as given
	Line, Col int
	Index     int
}

// Common are the keys any step may carry besides its own.
type Common struct {
	Name  string         `yaml:"name" doc:"a label for the step in output and reports"`
	Phase string         `yaml:"phase" doc:"start a new metrics phase with this name before the step runs"`
	If    *expr.BoolExpr `yaml:"if" doc:"run the step only when this expression holds"`
}

// Describe is how a step is named in output, in progress lines, errors and
// reports alike: its number, its name if it has one, its kind and place,
// `step 3 "failing shell" (exec, plan.yaml:14)`.
func (s *StepDef) Describe() string {
	where := fmt.Sprintf("line %d", s.Line)
	if s.File != "" {
		where = fmt.Sprintf("%s:%d", s.File, s.Line)
	}
	return stepLabel(s.Index, s.Name, s.Kind+", "+where)
}

// stepLabel is `step 3 "name" (what)`, or `step 3 (what)` for a step
// without a name.
func stepLabel(index int, name, what string) string {
	if name != "" {
		return fmt.Sprintf("step %d %q (%s)", index+1, name, what)
	}
	return fmt.Sprintf("step %d (%s)", index+1, what)
}

// TopLevel are the keys at the top of a plan. The loader reads each
// section on its own; this struct names and documents them.
type TopLevel struct {
	Name        string              `yaml:"name" required:"true" doc:"the plan's name; report files are named after it"`
	Description string              `yaml:"description" doc:"free text, printed in the report"`
	Vars        map[string]string   `yaml:"vars" doc:"variables, name: default; each can be overridden with --set name=value and is used as ${name} or vars.name"`
	Matrix      map[string][]string `yaml:"matrix" doc:"variables with lists of values: the steps run once per combination"`
	Targets     yaml.Node           `yaml:"targets" type:"name: mapping" doc:"the brokers and other systems, by name (see targets)"`
	Workloads   yaml.Node           `yaml:"workloads" type:"name: mapping" doc:"background activities over targets, by name (see workloads); a plan needs workloads or collectors"`
	Steps       yaml.Node           `yaml:"steps" type:"list of steps" required:"true" doc:"what to do, in order (see steps)"`
	Collectors  yaml.Node           `yaml:"collectors" type:"name: mapping" doc:"figures sampled every second besides the workloads' own (see collectors)"`
	Report      ReportSpec          `yaml:"report" doc:"titles, extra tables, file names"`
	Progress    time.Duration       `yaml:"progress" default:"5s" doc:"how often progress lines are printed; 0s = never"`
	Workers     []string            `yaml:"workers" doc:"worker processes (host:port of planrun worker) to run the workloads on; --workers and PLANRUN_WORKERS override it (see Running across machines)"`
}

var topKeys = yamldecode.Fields(TopLevel{})

// Options are what the command line adds to a plan.
type Options struct {
	Set       map[string]string           // --set name=value
	LookupEnv func(string) (string, bool) // for ${env:NAME}; nil: the process environment
	// Formats are the report formats the binary offers; when set, a plan
	// asking for another is an error at load time.
	Formats []string
}

// Load reads and checks a plan file, every matrix combination of it,
// without contacting anything.
func Load(file string, opts Options) (*Source, []*Plan, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, &yamldecode.ListError{List: []yamldecode.Error{{File: file, Msg: fmt.Sprintf("cannot read plan: %v", err)}}}
	}
	return Parse(file, data, opts)
}

// Parse is Load for a plan already in memory.
func Parse(file string, data []byte, opts Options) (*Source, []*Plan, error) {
	src, errs, err := parseSource(file, data, opts)
	if err != nil {
		return nil, nil, err
	}
	var plans []*Plan
	for _, combo := range src.Combinations() {
		p, err := src.Instance(combo)
		if err != nil {
			if le, ok := err.(*yamldecode.ListError); ok {
				errs.List = append(errs.List, le.List...)
				continue
			}
			return nil, nil, err
		}
		plans = append(plans, p)
	}
	if err := errs.Err(); err != nil {
		return nil, nil, err
	}
	return src, plans, nil
}

// parseSource reads the file's structure and variables. Problems that leave
// the rest decodable are returned in errs, so that the instances are still
// decoded and every error of the plan is reported at once.
func parseSource(file string, data []byte, opts Options) (*Source, *yamldecode.Errors, error) {
	errs := &yamldecode.Errors{File: file}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		e := yamldecode.SyntaxError(file, data, err)
		if strings.HasSuffix(e.Msg, "did not find expected ',' or '}'") {
			e.Msg += " (a ${...} inside { } must be quoted: threads: \"${threads}\")"
		}
		return nil, nil, &yamldecode.ListError{List: []yamldecode.Error{e}}
	}
	if len(doc.Content) == 0 {
		errs.At(nil, "the plan is empty; it needs at least name:, workloads: and steps:")
		return nil, nil, errs.Err()
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		errs.At(root, "a plan is a mapping with keys %s", strings.Join(topKeys, ", "))
		return nil, nil, errs.Err()
	}
	s := &Source{File: file, root: root, keys: map[string]*yaml.Node{}, Vars: map[string]string{}, Secrets: map[string]bool{}, formats: opts.Formats}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if !contains(topKeys, k.Value) {
			errs.At(k, "unknown key %q at the top of the plan%s; known: %s", k.Value, yamldecode.Suggest(k.Value, topKeys), strings.Join(topKeys, ", "))
			continue
		}
		if _, dup := s.keys[k.Value]; dup {
			errs.At(k, "%q given twice", k.Value)
			continue
		}
		s.keys[k.Value] = v
	}
	d := yamldecode.NewDecoder(file, nil)
	d.Errs = errs
	d.LookupEnv = opts.LookupEnv
	s.lookupEnv = opts.LookupEnv
	// Variables may use the environment and the variables above them.
	d.Vars = s.Vars
	d.Mapping(s.keys["vars"], "vars", func(name string, k, v *yaml.Node) {
		if !validName(name) {
			errs.At(k, "variable name %q is not allowed; use letters, digits and _", name)
			return
		}
		val, _ := d.Scalar(v, fmt.Sprintf("variable %q", name))
		s.VarOrder = append(s.VarOrder, name)
		s.Vars[name] = val
	})
	d.Mapping(s.keys["matrix"], "matrix", func(name string, k, v *yaml.Node) {
		if !validName(name) {
			errs.At(k, "matrix variable name %q: use letters, digits and _", name)
			return
		}
		if _, dup := s.Vars[name]; dup {
			errs.At(k, "%q is both a variable and a matrix variable; keep one", name)
			return
		}
		var vals []string
		d.Decode(v, &vals, fmt.Sprintf("matrix %q", name))
		if len(vals) == 0 {
			errs.At(v, "matrix %q needs a list of values, like [16, 32, 64]", name)
			return
		}
		s.Matrix = append(s.Matrix, MatrixVar{Name: name, Values: vals})
	})
	if n := s.keys["name"]; n != nil {
		s.Name, _ = d.Scalar(n, "name")
	} else {
		errs.At(root, "the plan needs a name: (used in report file names)")
	}
	if n := s.keys["description"]; n != nil {
		s.Description, _ = d.Scalar(n, "description")
	}
	if n := s.keys["workers"]; n != nil {
		d.Decode(n, &s.Workers, "workers")
		for _, w := range s.Workers {
			if _, _, err := net.SplitHostPort(w); err != nil {
				errs.At(n, "workers: %q is not host:port (a planrun worker's --listen address)", w)
			}
		}
	}
	var known []string
	known = append(known, s.VarOrder...)
	for _, m := range s.Matrix {
		known = append(known, m.Name)
	}
	setNames := make([]string, 0, len(opts.Set))
	for k := range opts.Set {
		setNames = append(setNames, k)
	}
	sort.Strings(setNames)
	for _, k := range setNames {
		v := opts.Set[k]
		if !contains(known, k) {
			errs.At(nil, "--set %s: the plan has no variable %q%s; its variables are: %s", k, k, yamldecode.Suggest(k, known), strings.Join(known, ", "))
			continue
		}
		if _, ok := s.Vars[k]; ok {
			s.Vars[k] = v
			continue
		}
		for i := range s.Matrix {
			if s.Matrix[i].Name == k {
				s.Matrix[i].Values = strings.Split(v, ",")
			}
		}
	}
	return s, errs, nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func validName(s string) bool { return nameRE.MatchString(s) }

func contains(list []string, s string) bool { return slices.Contains(list, s) }

// Combinations lists the matrix combinations in order (the first variable
// varies slowest); a plan without a matrix has one empty combination.
func (s *Source) Combinations() [][]KV {
	combos := [][]KV{{}}
	for _, m := range s.Matrix {
		var next [][]KV
		for _, c := range combos {
			for _, v := range m.Values {
				nc := append(append([]KV{}, c...), KV{Name: m.Name, Value: v})
				next = append(next, nc)
			}
		}
		combos = next
	}
	return combos
}

// Label names a combination for reports: "threads=128 queues=16".
func Label(combo []KV) string {
	parts := make([]string, len(combo))
	for i, kv := range combo {
		parts[i] = kv.Name + "=" + kv.Value
	}
	return strings.Join(parts, " ")
}
