package runner

import (
	"fmt"
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
	"github.com/planrun/planrun/plan"
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
	Probes     []string
}

// template returns an environment of zero values with the real types.
func (e *ExprEnv) template() map[string]any {
	env := map[string]any{
		"phase":   PhaseInfo{},
		"phases":  map[string]map[string]metrics.Stats{},
		"elapsed": time.Duration(0),
		"backlog": metrics.Backlog{},
		"vars":    typedVars(e.Vars),
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

// typedVars gives expressions numbers where a variable holds a number.
func typedVars(vars map[string]string) map[string]any {
	out := make(map[string]any, len(vars))
	for k, v := range vars {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[k] = f
		} else {
			out[k] = v
		}
	}
	return out
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
func (b *BoolExpr) UnmarshalPlan(d *plan.Decoder, n *yaml.Node) { b.compile(d, n, true) }

// UnmarshalPlan compiles a value expression.
func (e *Expr) UnmarshalPlan(d *plan.Decoder, n *yaml.Node) { e.compile(d, n, false) }

func (e *Expr) compile(d *plan.Decoder, n *yaml.Node, boolean bool) {
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

// exprErr shortens expr's message and adds the names an unknown one could be.
func exprErr(err error, env *ExprEnv) string {
	msg := err.Error()
	if i := strings.Index(msg, "\n"); i > 0 {
		msg = msg[:i]
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
