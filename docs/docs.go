// Package docs describes every plan component (drivers, workload kinds,
// steps, collectors and the plan's own sections) from the same struct tags
// the loader decodes: `yaml:` names a key, `doc:` says what it does,
// `default:` gives its default, `required:"true"` and `secret:"true"` mark
// it, and `type:` names the type of a key the loader reads itself (a
// yaml.Node: a list of steps, workloads by name). `planrun explain` prints these descriptions and the README's
// reference tables are generated from them, so the manual cannot drift
// from what the loader accepts.
package docs

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/expr"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/units"
	"github.com/planrun/planrun/workloads"
)

// Field is one key a plan may set.
type Field struct {
	Key      string
	Type     string // duration, size, string, number, bool, list of strings, mapping, expression...
	Default  string
	Required bool
	Secret   bool
	Doc      string
	// Fields are the keys of a nested mapping (or of each entry of a list
	// or map of mappings).
	Fields []Field
}

// Section is the keys of one place in a plan.
type Section struct {
	Name   string // target, produce, consume, keys...
	Where  string // where in a plan the keys go
	Fields []Field
}

// Component is a documented part of a plan.
type Component struct {
	Kind     string // driver, workload, step, collector, plan
	Name     string
	Doc      string
	Sections []Section
	// Capabilities are what a driver declares (drivers only).
	Capabilities *drivers.Capabilities
}

// Section returns the component's section of that name.
func (c Component) Section(name string) (Section, bool) {
	for _, s := range c.Sections {
		if s.Name == name {
			return s, true
		}
	}
	return Section{}, false
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	sizeType     = reflect.TypeOf(units.Size(0))
	nodeType     = reflect.TypeOf(yaml.Node{})
	exprType     = reflect.TypeOf(expr.Expr{})
	condType     = reflect.TypeOf(expr.BoolExpr{})
)

// Fields lists the keys of the structs behind vs (values or pointers), in
// declaration order; a key in several structs is listed once.
func Fields(vs ...any) []Field {
	var out []Field
	seen := map[string]bool{}
	for _, t := range structTypes(vs) {
		for _, f := range structFields(t) {
			if !seen[f.Key] {
				seen[f.Key] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// structTypes are the struct types behind vs (values or pointers).
func structTypes(vs []any) []reflect.Type {
	var out []reflect.Type
	for _, v := range vs {
		if v == nil {
			continue
		}
		t := reflect.TypeOf(v)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() == reflect.Struct {
			out = append(out, t)
		}
	}
	return out
}

// eachField calls f for every key of a struct in declaration order, the
// keys of inline structs included (they are the parent's).
func eachField(t reflect.Type, f func(name string, sf reflect.StructField)) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if sf.Type.Kind() == reflect.Struct && (sf.Anonymous && sf.Tag.Get("yaml") == "" || sf.Tag.Get("yaml") == ",inline") {
			eachField(sf.Type, f)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		f(name, sf)
	}
}

func structFields(t reflect.Type) []Field {
	var out []Field
	eachField(t, func(name string, sf reflect.StructField) {
		f := Field{Key: name, Doc: sf.Tag.Get("doc"), Default: sf.Tag.Get("default"),
			Required: sf.Tag.Get("required") == "true", Secret: sf.Tag.Get("secret") == "true"}
		f.Type, f.Fields = describeType(sf.Type)
		if typ := sf.Tag.Get("type"); typ != "" {
			f.Type = typ
		}
		out = append(out, f)
	})
	return out
}

// describeType names a field's type as a plan author writes it.
func describeType(t reflect.Type) (string, []Field) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if pt, ok := reflect.New(t).Interface().(interface{ PlanType() string }); ok {
		// A value that may also be a mapping (proxy: true or its keys)
		// lists the mapping's keys.
		var fs []Field
		if a, ok := reflect.New(t).Interface().(Alternatives); ok {
			for _, v := range a.PlanAlternatives() {
				if vt := reflect.TypeOf(v); vt.Kind() == reflect.Struct {
					fs = structFields(vt)
				}
			}
		}
		return pt.PlanType(), fs
	}
	switch t {
	case durationType:
		return "duration", nil
	case sizeType:
		return "size", nil
	case nodeType:
		return "mapping", nil
	case exprType:
		return "expression", nil
	case condType:
		return "condition", nil
	}
	switch t.Kind() {
	case reflect.String:
		return "string", nil
	case reflect.Bool:
		return "bool", nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "number", nil
	case reflect.Slice:
		et, fs := describeType(t.Elem())
		if fs != nil {
			return "list of mappings", fs
		}
		return "list of " + et + "s", nil
	case reflect.Map:
		et, fs := describeType(t.Elem())
		if fs != nil {
			return "name: mapping", fs
		}
		return "name: " + et, nil
	case reflect.Struct:
		fs := structFields(t)
		if len(fs) == 0 {
			return "value", nil
		}
		return "mapping", fs
	}
	return "value", nil
}

// Components lists every documented component: the plan's own sections,
// then workload kinds, steps, collectors and drivers.
func Components() []Component {
	out := planSections()
	for _, k := range workloads.Kinds() {
		c := Component{Kind: "workload", Name: k.Name, Doc: k.Doc}
		// A kind may have no keys of its own, only its driver's (connect).
		if fs := Fields(k.Keys...); len(fs) > 0 {
			c.Sections = []Section{{Name: "keys", Where: "workloads: NAME: " + k.Name + ":", Fields: fs}}
		}
		out = append(out, c)
	}
	for _, k := range plan.StepKinds() {
		out = append(out, Component{Kind: "step", Name: k.Name, Doc: k.Doc,
			Sections: []Section{{Name: "keys", Where: "steps: - " + k.Name + ":", Fields: Fields(k.New())}}})
	}
	for _, k := range plan.CollectorKinds() {
		out = append(out, Component{Kind: "collector", Name: k.Name, Doc: k.Doc,
			Sections: []Section{{Name: "keys", Where: "collectors: NAME: {kind: " + k.Name + ", ...}", Fields: Fields(k.New())}}})
	}
	for _, name := range drivers.Names() {
		d, _ := drivers.Lookup(name)
		c := Component{Kind: "driver", Name: name, Doc: drivers.Doc(name)}
		if caps, ok := drivers.CapabilitiesOf(name); ok {
			c.Capabilities = &caps
		}
		c.Sections = append(c.Sections, Section{Name: "target", Where: "targets: NAME: {driver: " + name + ", ...}", Fields: Fields(d.NewTargetConfig())})
		if o := workloads.ProduceOptions(d); o != nil {
			if fs := Fields(o); len(fs) > 0 {
				c.Sections = append(c.Sections, Section{Name: "produce", Where: "a workload's produce: (and connect:, a relay's to:)", Fields: fs})
			}
		}
		if o := workloads.ConsumeOptions(d); o != nil {
			if fs := Fields(o); len(fs) > 0 {
				c.Sections = append(c.Sections, Section{Name: "consume", Where: "a workload's consume: (and a relay's from:)", Fields: fs})
			}
		}
		out = append(out, c)
	}
	return out
}

// planSections are the sections of a plan that belong to no registered
// component.
func planSections() []Component {
	return []Component{
		{Kind: "plan", Name: "plan", Doc: "the top level of a plan file",
			Sections: []Section{{Name: "keys", Where: "the top of the file", Fields: Fields(plan.TopLevel{})}}},
		{Kind: "plan", Name: "targets", Doc: "the brokers and other systems a plan talks to, by name; each also takes its driver's keys",
			Sections: []Section{{Name: "keys", Where: "targets: NAME:", Fields: Fields(plan.TargetGeneric{})}}},
		{Kind: "plan", Name: "workloads", Doc: "background activities over targets, by name; each has exactly one kind section",
			Sections: []Section{{Name: "keys", Where: "workloads: NAME:", Fields: Fields(plan.WorkloadGeneric{})}}},
		{Kind: "plan", Name: "steps", Doc: "what a plan does, in order; every step may carry these keys besides its own",
			Sections: []Section{{Name: "keys", Where: "steps: - ...", Fields: Fields(plan.Common{})}}},
		{Kind: "plan", Name: "collectors", Doc: "figures sampled every second besides the workloads' own; each also takes its kind's keys",
			Sections: []Section{{Name: "keys", Where: "collectors: NAME:", Fields: Fields(plan.CollectorGeneric{})}}},
		{Kind: "plan", Name: "report", Doc: "what the run writes",
			Sections: []Section{{Name: "keys", Where: "report:", Fields: Fields(plan.ReportSpec{})}}},
	}
}

// Find returns the components a query names: a name ("kafka", "wait"),
// or a kind and a name ("step wait", "driver kafka").
func Find(query []string) ([]Component, error) {
	all := Components()
	var kind, name string
	switch len(query) {
	case 1:
		name = query[0]
	case 2:
		kind, name = query[0], query[1]
	default:
		return nil, fmt.Errorf("explain takes a name, or a kind and a name, such as: explain kafka, explain step wait")
	}
	var out []Component
	for _, c := range all {
		if c.Name == name && (kind == "" || c.Kind == kind) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		var names []string
		for _, c := range all {
			names = append(names, c.Name)
		}
		return nil, fmt.Errorf("nothing called %q%s; ask for one of: %s", strings.Join(query, " "), suggest(name, names), strings.Join(names, ", "))
	}
	return out, nil
}
