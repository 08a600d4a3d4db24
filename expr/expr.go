// Package expr is the expression language of plans (expr-lang/expr): the
// names an expression may use (a Scope), the one function that builds the
// environment both for type checking at load time and for evaluation at run
// time, and compiled expressions that decode themselves from plan YAML.
package expr

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	exprlang "github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/units"
	"github.com/planrun/planrun/yamldecode"
)

var exprFuncs = []exprlang.Option{
	exprlang.Function("size", func(params ...any) (any, error) {
		s, ok := params[0].(string)
		if !ok {
			return float64(0), fmt.Errorf("size() takes a string such as \"1GiB\"")
		}
		v, err := units.ParseSize(s)
		return float64(v), err
	}, new(func(string) float64)),
	exprlang.Function("mb", func(params ...any) (any, error) {
		return toFloat(params[0]) / 1e6, nil
	}, new(func(float64) float64), new(func(int64) float64), new(func(int) float64)),
	exprlang.Function("mib", func(params ...any) (any, error) {
		return toFloat(params[0]) / (1 << 20), nil
	}, new(func(float64) float64), new(func(int64) float64), new(func(int) float64)),
	exprlang.Function(naCheck, func(params ...any) (any, error) {
		x, _ := params[0].(float64)
		if math.IsNaN(x) {
			src, _ := params[1].(string)
			return nil, &NAError{Figure: src}
		}
		return x, nil
	}, new(func(float64, string) float64)),
}

// naCheck is the function every number compared in a condition goes
// through (see naGuard): a figure that was not measured fails the
// comparison instead of making it silently false.
const naCheck = "__measured"

// NAError is a comparison over a figure that was not measured.
type NAError struct{ Figure string }

func (e *NAError) Error() string {
	return fmt.Sprintf("%s is n/a: it was not measured (no latency or per-second maximum without messages, no per-second maximum in a phase shorter than a second, no rate in one with fewer than two messages)", e.Figure)
}

// naGuard wraps both numeric sides of every comparison in naCheck.
type naGuard struct{}

func (naGuard) Visit(node *ast.Node) {
	b, ok := (*node).(*ast.BinaryNode)
	if !ok {
		return
	}
	switch b.Operator {
	case ">", ">=", "<", "<=", "==", "!=":
	default:
		return
	}
	for _, side := range []*ast.Node{&b.Left, &b.Right} {
		switch n := (*side).(type) {
		case *ast.FloatNode, *ast.IntegerNode:
			continue
		case *ast.CallNode:
			if id, ok := n.Callee.(*ast.IdentifierNode); ok && id.Value == naCheck {
				continue
			}
		}
		if t := (*side).Type(); t == nil || t.Kind() != reflect.Float64 {
			continue
		}
		src := (*side).String()
		ast.Patch(side, &ast.CallNode{Callee: &ast.IdentifierNode{Value: naCheck}, Arguments: []ast.Node{*side, &ast.StringNode{Value: src}}})
	}
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
	refs  refs
}

type exprPart struct {
	src         string
	left, right *vm.Program // right is nil for a figure tested on its own
}

// BoolExpr is an Expr that must evaluate to true or false.
type BoolExpr struct{ Expr }

// UnmarshalPlan compiles a condition.
func (b *BoolExpr) UnmarshalPlan(d *yamldecode.Decoder, n *yaml.Node) { b.decode(d, n, true) }

// UnmarshalPlan compiles a value expression.
func (e *Expr) UnmarshalPlan(d *yamldecode.Decoder, n *yaml.Node) { e.decode(d, n, false) }

func (e *Expr) decode(d *yamldecode.Decoder, n *yaml.Node, boolean bool) {
	src, ok := d.Scalar(n, "expression")
	if !ok {
		return
	}
	e.Src, e.Line, e.Col = strings.TrimSpace(src), n.Line, n.Column
	env, _ := d.Context.(*Scope)
	if env == nil {
		d.Errs.At(n, "expressions are not allowed here")
		return
	}
	prog, err := compile(e.Src, env, boolean)
	if err != nil {
		d.Errs.At(n, "expression %q: %s", e.Src, exprErr(err, env))
		return
	}
	e.refs = findRefs(e.Src)
	if msg := e.checkProbes(env); msg != "" {
		d.Errs.At(n, "expression %q: %s", e.Src, msg)
	}
	for _, m := range phaseRef.FindAllStringSubmatch(e.Src, -1) {
		if !slices.Contains(env.Phases, m[1]) {
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

func compile(src string, env *Scope, boolean bool) (*vm.Program, error) {
	opts := append([]exprlang.Option{exprlang.Env(env.Template())}, exprFuncs...)
	if boolean {
		opts = append(opts, exprlang.AsBool(), exprlang.Patch(naGuard{}))
	}
	prog, err := exprlang.Compile(src, opts...)
	return prog, plainTypes(err)
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
func exprErr(err error, env *Scope) string {
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
		msg += fmt.Sprintf("; workloads and collectors are: %s; also phase, phases, elapsed, backlog, vars, probes, search", strings.Join(names, ", "))
	}
	return msg
}

// comparisons finds the comparisons in a condition (through &&, || and !)
// and compiles their two sides separately, and the figures it tests on
// their own (!producer.running): what a progress line or a failed assert
// shows. Constants show nothing.
func comparisons(src string, env *Scope) []exprPart {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil
	}
	var parts []exprPart
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		switch x := n.(type) {
		case *ast.UnaryNode:
			if x.Operator == "!" || x.Operator == "not" {
				walk(x.Node)
			}
			return
		case *ast.BoolNode, *ast.NilNode, *ast.IntegerNode, *ast.FloatNode, *ast.StringNode, *ast.ConstantNode:
			return
		case *ast.BinaryNode:
		default:
			if v, err := compile(n.String(), env, false); err == nil {
				parts = append(parts, exprPart{src: n.String(), left: v})
			}
			return
		}
		b := n.(*ast.BinaryNode)
		switch b.Operator {
		case "&&", "||", "and", "or":
			walk(b.Left)
			walk(b.Right)
		case "in", "not in", "contains", "startsWith", "endsWith", "matches":
			// No target to show: the values looked at and looked for.
			walk(b.Left)
			walk(b.Right)
		case ">", ">=", "<", "<=", "==", "!=":
			l, lerr := compile(b.Left.String(), env, false)
			r, rerr := compile(b.Right.String(), env, false)
			if lerr == nil && rerr == nil {
				parts = append(parts, exprPart{src: b.Left.String(), left: l, right: r})
			}
		}
	}
	walk(tree.Node)
	return parts
}

// Kind is the Go kind the expression yields, as far as it is known at load.
func (e *Expr) Kind() reflect.Kind {
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
	v, err := exprlang.Run(e.prog, env)
	return v, plainTypes(err)
}

// goTypes are the Go type names expr-lang's errors speak of.
var goTypes = regexp.MustCompile(`map\[string\](?:interface \{\}|any|float64|string)|\[\](?:interface \{\}|any|float64|string)|interface \{\}|\b(?:float64|int64|int)\b`)

// plainTypes names the types in an evaluation error as plans do: mapping,
// list, number.
func plainTypes(err error) error {
	if err == nil {
		return nil
	}
	msg := goTypes.ReplaceAllStringFunc(err.Error(), func(t string) string {
		switch {
		case strings.HasPrefix(t, "map["):
			return "mapping"
		case strings.HasPrefix(t, "[]"):
			return "list"
		case t == "interface {}":
			return "any"
		}
		return "number"
	})
	if msg == err.Error() {
		return err
	}
	return &plainError{msg: msg, err: err}
}

// plainError is an error with a new text that still unwraps to the first.
type plainError struct {
	msg string
	err error
}

func (e *plainError) Error() string { return e.msg }
func (e *plainError) Unwrap() error { return e.err }

// True evaluates a condition.
func (b *BoolExpr) True(env map[string]any) (bool, error) {
	v, err := b.Eval(env)
	if na := (*NAError)(nil); errors.As(err, &na) {
		return false, fmt.Errorf("evaluating %q: %w", b.Src, na)
	}
	if err != nil {
		if perr := b.emptyProbes(env); perr != nil {
			err = perr
		}
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
		l, lerr := exprlang.Run(p.left, env)
		if p.right == nil {
			if lerr == nil {
				out = append(out, fmt.Sprintf("%s = %s", p.src, FormatValue(p.src, l)))
			}
			continue
		}
		r, rerr := exprlang.Run(p.right, env)
		if lerr != nil || rerr != nil {
			continue
		}
		out = append(out, fmt.Sprintf("%s = %s (target %s)", p.src, FormatValue(p.src, l), FormatValue(p.src, r)))
	}
	return strings.Join(out, ", ")
}
