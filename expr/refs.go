package expr

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
)

// refs are the names an expression reads, found when it loads.
type refs struct {
	// names are the top-level names (vars, probes, a workload, ...) and
	// functions it reads.
	names []string
	// probes are the X of every probes.X (or probes["X"]) it reads.
	probes []string
}

// findRefs walks an expression's syntax tree.
func findRefs(src string) refs {
	var r refs
	tree, err := parser.Parse(src)
	if err != nil {
		return r
	}
	ast.Walk(&tree.Node, &r)
	return r
}

// Visit implements ast.Visitor.
func (r *refs) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		if !slices.Contains(r.names, n.Value) {
			r.names = append(r.names, n.Value)
		}
	case *ast.MemberNode:
		id, ok := n.Node.(*ast.IdentifierNode)
		if !ok || id.Value != "probes" {
			return
		}
		if p, ok := n.Property.(*ast.StringNode); ok && !slices.Contains(r.probes, p.Value) {
			r.probes = append(r.probes, p.Value)
		}
	}
}

// varsOnly are the names an expression over the plan's variables alone may
// read: vars and the functions of constant arguments.
var varsOnly = []string{"vars", "size", "mb", "mib"}

// OnlyVars reports whether the expression reads nothing but the plan's
// variables (and constants), so that its value is known when the plan
// loads, such as vars.mqtt_url == "embedded".
func (e *Expr) OnlyVars() bool {
	if e.prog == nil {
		return false
	}
	for _, n := range e.refs.names {
		if !slices.Contains(varsOnly, n) {
			return false
		}
	}
	return true
}

// AtLoad evaluates a condition over the plan's variables alone (see
// OnlyVars): known is false when it reads anything else, or fails.
func (b *BoolExpr) AtLoad(s *Scope) (value, known bool) {
	if !b.OnlyVars() {
		return false, false
	}
	v, err := b.True(s.Template())
	if err != nil {
		return false, false
	}
	return v, true
}

// checkProbes reports the probes an expression reads that no earlier step
// keeps, when the scope tracks them (see Scope.Probes).
func (e *Expr) checkProbes(s *Scope) string {
	if s.Probes == nil {
		return ""
	}
	var missing []string
	for _, p := range e.refs.probes {
		if !slices.Contains(s.Probes, p) {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	known := "none does"
	if len(s.Probes) > 0 {
		sorted := slices.Clone(s.Probes)
		sort.Strings(sorted)
		known = "they keep " + strings.Join(sorted, ", ")
	}
	return fmt.Sprintf("no earlier step keeps probe %q (a probe step, or exec or shell with as: %s, before this one; %s)",
		missing[0], missing[0], known)
}

// EmptyProbe names a probe the expression reads that has no value in env
// (its step was skipped by its if:, or has not run yet); "" for none.
func (e *Expr) EmptyProbe(env map[string]any) string {
	probes, _ := env["probes"].(map[string]any)
	for _, p := range e.refs.probes {
		if probes[p] == nil {
			return p
		}
	}
	return ""
}

// emptyProbes explains an evaluation that failed on a probe that has no
// value.
func (e *Expr) emptyProbes(env map[string]any) error {
	if p := e.EmptyProbe(env); p != "" {
		return fmt.Errorf("probes.%s has no value: the step that keeps it was skipped by its if: (test for that first: probes.%s != nil && ...)", p, p)
	}
	return nil
}
