package runner

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/yamldecode"
	"github.com/planrun/planrun/units"
)

// PhaseInfo is `phase` in expressions: the current phase.
type PhaseInfo struct {
	Name    string        `expr:"name"`
	Elapsed time.Duration `expr:"elapsed"`
}

// reserved names cannot be workload, collector or probe names because
// expressions use them.
var reserved = map[string]bool{"phase": true, "phases": true, "elapsed": true, "backlog": true, "vars": true,
	"probes": true, "size": true, "mb": true, "mib": true, "extra": true, "true": true, "false": true, "nil": true,
	"all": true, "run": true}

// ExprEnv describes, at load time, the names an expression may use; it
// compiles expressions against a template of the environment so typos fail
// before any broker is contacted.
type ExprEnv struct {
	Workloads  []string
	Collectors map[string][]string // collector name -> figure names
	Vars       map[string]string
	Phases     []string // phase names the steps declare

	varsType reflect.Type
}

// varsValue gives expressions the variables as a struct, so that a
// misspelt vars.name fails when the plan loads: numbers where a value is a
// number, strings otherwise.
func (e *ExprEnv) varsValue(vars map[string]string) any {
	if e.varsType == nil {
		names := make([]string, 0, len(e.Vars))
		for k := range e.Vars {
			names = append(names, k)
		}
		sort.Strings(names)
		fields := make([]reflect.StructField, 0, len(names))
		for _, k := range names {
			t := reflect.TypeOf("")
			if _, err := strconv.ParseFloat(e.Vars[k], 64); err == nil {
				t = reflect.TypeOf(0.0)
			}
			fields = append(fields, reflect.StructField{Name: "V" + k, Type: t, Tag: reflect.StructTag(`expr:"` + k + `"`)})
		}
		e.varsType = reflect.StructOf(fields)
	}
	v := reflect.New(e.varsType).Elem()
	for i := 0; i < e.varsType.NumField(); i++ {
		f := e.varsType.Field(i)
		raw := vars[f.Tag.Get("expr")]
		if f.Type.Kind() == reflect.Float64 {
			x, _ := strconv.ParseFloat(raw, 64)
			v.Field(i).SetFloat(x)
		} else {
			v.Field(i).SetString(raw)
		}
	}
	return v.Interface()
}

// template returns an environment of zero values with the real types.
func (e *ExprEnv) template() map[string]any {
	env := map[string]any{
		"phase":   PhaseInfo{},
		"phases":  map[string]map[string]metrics.Stats{},
		"elapsed": time.Duration(0),
		"backlog": metrics.Backlog{},
		"vars":    e.varsValue(e.Vars),
		"probes":  map[string]any{},
		"extra":   map[string]float64{},
	}
	for _, w := range e.Workloads {
		env[w] = metrics.Stats{}
	}
	for c := range e.Collectors {
		env[c] = map[string]float64{}
	}
	return env
}

var exprFuncs = []expr.Option{
	expr.Function("size", func(params ...any) (any, error) {
		s, ok := params[0].(string)
		if !ok {
			return float64(0), fmt.Errorf("size() takes a string such as \"1GiB\"")
		}
		v, err := units.ParseSize(s)
		return float64(v), err
	}, new(func(string) float64)),
	expr.Function("mb", func(params ...any) (any, error) {
		return toFloat(params[0]) / 1e6, nil
	}, new(func(float64) float64), new(func(int64) float64), new(func(int) float64)),
	expr.Function("mib", func(params ...any) (any, error) {
		return toFloat(params[0]) / (1 << 20), nil
	}, new(func(float64) float64), new(func(int64) float64), new(func(int) float64)),
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case int:
		return float64(x)
	}
	return 0
}

// Expr is an expression in a plan, compiled when the plan loads.
type Expr struct {
	Src       string
	Line, Col int
	prog      *vm.Program
	// parts are the comparisons inside a condition, shown in progress lines
	// so a user sees how far a wait is from holding.
	parts []exprPart
}

type exprPart struct {
	src         string
	left, right *vm.Program
}

// BoolExpr is an Expr that must evaluate to true or false.
type BoolExpr struct{ Expr }

// UnmarshalPlan compiles a condition.
func (b *BoolExpr) UnmarshalPlan(d *yamldecode.Decoder, n *yaml.Node) { b.compile(d, n, true) }

// UnmarshalPlan compiles a value expression.
func (e *Expr) UnmarshalPlan(d *yamldecode.Decoder, n *yaml.Node) { e.compile(d, n, false) }

func (e *Expr) compile(d *yamldecode.Decoder, n *yaml.Node, boolean bool) {
	src, ok := d.Scalar(n, "expression")
	if !ok {
		return
	}
	e.Src, e.Line, e.Col = strings.TrimSpace(src), n.Line, n.Column
	env, _ := d.Context.(*ExprEnv)
	if env == nil {
		d.Errs.At(n, "expressions are not allowed here")
		return
	}
	prog, err := compileExpr(e.Src, env, boolean)
	if err != nil {
		d.Errs.At(n, "expression %q: %s", e.Src, exprErr(err, env))
		return
	}
	for _, m := range phaseRef.FindAllStringSubmatch(e.Src, -1) {
		if !contains(env.Phases, m[1]) {
			d.Errs.At(n, "expression %q: no step starts phase %q%s; phases are: %s", e.Src, m[1], yamldecode.Suggest(m[1], env.Phases), strings.Join(env.Phases, ", "))
		}
	}
	// Variables given to size() and duration() are read now, so a bad
	// --set fails before the run, not in the middle of it.
	for _, m := range varCall.FindAllStringSubmatch(e.Src, -1) {
		val, ok := env.Vars[m[2]]
		if !ok {
			continue
		}
		var perr error
		if m[1] == "size" {
			_, perr = units.ParseSize(val)
		} else {
			_, perr = time.ParseDuration(val)
		}
		if perr != nil {
			d.Errs.At(n, "expression %q: variable %s = %q: %v", e.Src, m[2], val, perr)
		}
	}
	e.prog = prog
	if boolean {
		e.parts = comparisons(e.Src, env)
	}
}

func compileExpr(src string, env *ExprEnv, boolean bool) (*vm.Program, error) {
	opts := append([]expr.Option{expr.Env(env.template())}, exprFuncs...)
	if boolean {
		opts = append(opts, expr.AsBool())
	}
	return expr.Compile(src, opts...)
}

var (
	phaseRef = regexp.MustCompile(`phases\[\s*["']([^"']+)["']\s*\]`)
	varCall  = regexp.MustCompile(`\b(size|duration)\(\s*vars\.(\w+)\s*\)`)
	noField  = regexp.MustCompile(`type metrics\.(\w+) has no field (\w+)`)
	noVar    = regexp.MustCompile(`type struct \{.*\} has no field (\w+)`)
)

// figureNames lists the expression names of a metrics struct type.
func figureNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if n := t.Field(i).Tag.Get("expr"); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// exprErr shortens expr's message and adds the names an unknown one could be.
func exprErr(err error, env *ExprEnv) string {
	msg := err.Error()
	if i := strings.Index(msg, "\n"); i > 0 {
		msg = msg[:i]
	}
	if m := noField.FindStringSubmatch(msg); m != nil {
		var known []string
		what := "workload figure"
		switch m[1] {
		case "Stats":
			known = figureNames(reflect.TypeOf(metrics.Stats{}))
		case "Latency":
			known, what = figureNames(reflect.TypeOf(metrics.Latency{})), "latency figure"
		case "Backlog":
			known, what = figureNames(reflect.TypeOf(metrics.Backlog{})), "backlog figure"
		}
		return fmt.Sprintf("no %s %q%s; known: %s", what, m[2], yamldecode.Suggest(m[2], known), strings.Join(known, ", "))
	}
	if m := noVar.FindStringSubmatch(msg); m != nil && strings.Contains(msg, "expr:") {
		name := strings.TrimPrefix(m[1], "V")
		var known []string
		for k := range env.Vars {
			known = append(known, k)
		}
		sort.Strings(known)
		return fmt.Sprintf("no variable %q%s; variables are: %s", name, yamldecode.Suggest(name, known), strings.Join(known, ", "))
	}
	if strings.Contains(msg, "unknown name") {
		names := append([]string{}, env.Workloads...)
		for c := range env.Collectors {
			names = append(names, c)
		}
		sort.Strings(names)
		msg += fmt.Sprintf("; workloads and collectors are: %s; also phase, phases, elapsed, backlog, vars, probes", strings.Join(names, ", "))
	}
	return msg
}

// comparisons finds the comparisons in a condition (through && and ||) and
// compiles their two sides separately.
func comparisons(src string, env *ExprEnv) []exprPart {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil
	}
	var parts []exprPart
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		b, ok := n.(*ast.BinaryNode)
		if !ok {
			return
		}
		switch b.Operator {
		case "&&", "||", "and", "or":
			walk(b.Left)
			walk(b.Right)
		case ">", ">=", "<", "<=", "==", "!=":
			l, lerr := compileExpr(b.Left.String(), env, false)
			r, rerr := compileExpr(b.Right.String(), env, false)
			if lerr == nil && rerr == nil {
				parts = append(parts, exprPart{src: b.Left.String(), left: l, right: r})
			}
		}
	}
	walk(tree.Node)
	return parts
}

// kind is the Go kind the expression yields, as far as it is known at load.
func (e *Expr) kind() reflect.Kind {
	if e.prog == nil || e.prog.Node() == nil || e.prog.Node().Type() == nil {
		return reflect.Interface
	}
	return e.prog.Node().Type().Kind()
}

// Eval runs a compiled expression against an environment.
func (e *Expr) Eval(env map[string]any) (any, error) {
	if e.prog == nil {
		return nil, fmt.Errorf("expression %q was not compiled", e.Src)
	}
	return expr.Run(e.prog, env)
}

// True evaluates a condition.
func (b *BoolExpr) True(env map[string]any) (bool, error) {
	v, err := b.Eval(env)
	if err != nil {
		return false, fmt.Errorf("evaluating %q: %w", b.Src, err)
	}
	t, _ := v.(bool)
	return t, nil
}

// Progress says how far each comparison of a condition is: "backlog.bytes
// = 123.4 MB, want >= 200 MB".
func (b *BoolExpr) Progress(env map[string]any) string {
	var out []string
	for _, p := range b.parts {
		l, lerr := expr.Run(p.left, env)
		r, rerr := expr.Run(p.right, env)
		if lerr != nil || rerr != nil {
			continue
		}
		out = append(out, fmt.Sprintf("%s = %s (target %s)", p.src, FormatValue(p.src, l), FormatValue(p.src, r)))
	}
	return strings.Join(out, ", ")
}

// FormatValue prints a value for people: byte counts in MB when the
// expression is about bytes, durations rounded, floats trimmed.
func FormatValue(src string, v any) string {
	switch x := v.(type) {
	case time.Duration:
		return x.Round(time.Millisecond).String()
	case float64, int64, int:
		f := toFloat(x)
		if strings.Contains(src, "bytes") {
			return units.Human(f)
		}
		if f == float64(int64(f)) {
			return strconv.FormatInt(int64(f), 10)
		}
		return strconv.FormatFloat(f, 'f', 2, 64)
	}
	return fmt.Sprint(v)
}
