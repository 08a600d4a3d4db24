package yamldecode

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/units"
)

// Unmarshaler is a type that decodes itself from a YAML node, reporting
// problems through d.Errs.
type Unmarshaler interface {
	UnmarshalPlan(d *Decoder, n *yaml.Node)
}

// Decoder turns YAML nodes into Go values, interpolating variables in scalars.
type Decoder struct {
	Errs *Errors
	// Vars are the plan's variables after --set overrides, for ${name}.
	Vars map[string]string
	// LookupEnv looks up ${env:NAME}; nil means the process environment.
	LookupEnv func(string) (string, bool)
	// Secrets collects the values decoded into fields tagged secret:"true",
	// so reports and errors can redact them.
	Secrets map[string]bool
	// Context carries what custom Unmarshalers need (the plan loader stores its
	// expression environment here so expressions compile as they decode).
	Context any
}

// NewDecoder returns a decoder reporting into a fresh error list for file.
func NewDecoder(file string, vars map[string]string) *Decoder {
	return &Decoder{Errs: &Errors{File: file}, Vars: vars, Secrets: map[string]bool{}}
}

func (d *Decoder) lookupEnv(name string) (string, bool) {
	if d.LookupEnv != nil {
		return d.LookupEnv(name)
	}
	return os.LookupEnv(name)
}

// Interpolate expands ${var}, ${env:NAME} and ${env:NAME|default} in s.
// "$${" stands for a literal "${".
func (d *Decoder) Interpolate(n *yaml.Node, s string) (string, bool) {
	if !strings.Contains(s, "${") {
		return s, true
	}
	var b strings.Builder
	ok := true
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			d.Errs.At(n, "unclosed ${ in %q; write ${name} or ${env:NAME|default}", s)
			return "", false
		}
		ref := s[i+2 : i+end]
		s = s[i+end+1:]
		v, good := d.resolve(n, ref)
		ok = ok && good
		b.WriteString(v)
	}
	return b.String(), ok
}

func (d *Decoder) resolve(n *yaml.Node, ref string) (string, bool) {
	name, def, hasDef := strings.Cut(ref, "|")
	name = strings.TrimSpace(name)
	if env, isEnv := strings.CutPrefix(name, "env:"); isEnv {
		if v, ok := d.lookupEnv(env); ok && v != "" {
			return v, true
		}
		return def, true
	}
	if v, ok := d.Vars[name]; ok {
		return v, true
	}
	if hasDef {
		return def, true
	}
	known := make([]string, 0, len(d.Vars))
	for k := range d.Vars {
		known = append(known, k)
	}
	sort.Strings(known)
	d.Errs.At(n, "unknown variable ${%s}%s; define it under vars: (known: %s) or use ${env:NAME|default}", name, Suggest(name, known), strings.Join(known, ", "))
	return "", false
}

// Scalar returns the interpolated text of a scalar node, reporting an error
// (with what) if n is not a scalar.
func (d *Decoder) Scalar(n *yaml.Node, what string) (string, bool) {
	n = resolveAlias(n)
	if n.Kind != yaml.ScalarNode {
		d.Errs.At(n, "%s must be a single value, not a %s", what, kindName(n))
		return "", false
	}
	return d.Interpolate(n, n.Value)
}

var (
	durationType  = reflect.TypeOf(time.Duration(0))
	sizeType      = reflect.TypeOf(units.Size(0))
	nodeType      = reflect.TypeOf(yaml.Node{})
	unmarshalType = reflect.TypeOf((*Unmarshaler)(nil)).Elem()
)

// Decode fills out (a pointer) from n. what names the value in errors
// ("workload \"producer\"").
func (d *Decoder) Decode(n *yaml.Node, out any, what string) {
	d.decode(resolveAlias(n), reflect.ValueOf(out).Elem(), what, false)
}

// DecodeStructs decodes one mapping into several structs at once: each key
// goes to the first struct that has a field for it, and a key none of them
// has is an error listing the union of known keys. Drivers use this to add
// their own fields beside the generic ones.
func (d *Decoder) DecodeStructs(n *yaml.Node, what string, outs ...any) {
	n = resolveAlias(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.Errs.At(n, "%s must be a mapping of keys to values, not a %s", what, kindName(n))
		return
	}
	var vals []reflect.Value
	for _, o := range outs {
		if o == nil {
			continue
		}
		vals = append(vals, reflect.ValueOf(o).Elem())
	}
	d.decodeStruct(n, vals, what)
}

// Fields lists the YAML keys of a struct value or pointer, in declaration order.
func Fields(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); inline(f) {
			names = append(names, Fields(reflect.New(f.Type).Interface())...)
		} else if name := fieldName(f); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// inline reports whether a struct field's keys belong to its parent
// (`yaml:",inline"`): shared groups of keys, such as TLS file settings.
func inline(f reflect.StructField) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return opts == "inline" && f.Type.Kind() == reflect.Struct && f.IsExported()
}

func fieldName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag := f.Tag.Get("yaml")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" || name == "" {
		return ""
	}
	return name
}

func (d *Decoder) decode(n *yaml.Node, v reflect.Value, what string, secret bool) {
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalType) {
		if v.Kind() == reflect.Pointer && v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v.Addr().Interface().(Unmarshaler).UnmarshalPlan(d, n)
		return
	}
	switch v.Type() {
	case nodeType:
		v.Set(reflect.ValueOf(*n))
		return
	case durationType:
		s, ok := d.Scalar(n, what)
		if !ok {
			return
		}
		dur, err := ParseDuration(s)
		if err != nil {
			d.Errs.At(n, "%s: %v", what, err)
			return
		}
		v.SetInt(int64(dur))
		return
	case sizeType:
		s, ok := d.Scalar(n, what)
		if !ok {
			return
		}
		sz, err := units.ParseSize(s)
		if err != nil {
			d.Errs.At(n, "%s: %v", what, err)
			return
		}
		v.SetInt(int64(sz))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if isNull(n) {
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), what, secret)
	case reflect.Struct:
		if isNull(n) {
			return
		}
		if n.Kind != yaml.MappingNode {
			d.Errs.At(n, "%s must be a mapping with keys %s, not a %s", what, strings.Join(Fields(v.Addr().Interface()), ", "), kindName(n))
			return
		}
		d.decodeStruct(n, []reflect.Value{v}, what)
	case reflect.Slice:
		if isNull(n) {
			return
		}
		items := []*yaml.Node{n}
		if n.Kind == yaml.SequenceNode {
			items = n.Content
		}
		s := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, it := range items {
			d.decode(resolveAlias(it), s.Index(i), fmt.Sprintf("%s[%d]", what, i), secret)
		}
		v.Set(s)
	case reflect.Map:
		if isNull(n) {
			return
		}
		if n.Kind != yaml.MappingNode {
			d.Errs.At(n, "%s must be a mapping, not a %s", what, kindName(n))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], resolveAlias(n.Content[i+1])
			key, ok := d.Scalar(k, what+" key")
			if !ok {
				continue
			}
			ev := reflect.New(v.Type().Elem()).Elem()
			d.decode(val, ev, fmt.Sprintf("%s.%s", what, key), secret)
			m.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), ev)
		}
		v.Set(m)
	case reflect.String:
		s, ok := d.Scalar(n, what)
		if !ok {
			return
		}
		if secret && s != "" {
			d.Secrets[s] = true
		}
		v.SetString(s)
	case reflect.Bool:
		s, ok := d.Scalar(n, what)
		if !ok {
			return
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			d.Errs.At(n, "%s: want true or false, got %q", what, s)
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s, ok := d.Scalar(n, what)
		if !ok {
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
		if err != nil || v.OverflowInt(i) {
			d.Errs.At(n, "%s: want a whole number, got %q", what, s)
			return
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s, ok := d.Scalar(n, what)
		if !ok {
			return
		}
		i, err := strconv.ParseUint(strings.ReplaceAll(s, "_", ""), 10, 64)
		if err != nil || v.OverflowUint(i) {
			d.Errs.At(n, "%s: want a whole number of 0 or more, got %q", what, s)
			return
		}
		v.SetUint(i)
	case reflect.Float32, reflect.Float64:
		s, ok := d.Scalar(n, what)
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
		if err != nil {
			d.Errs.At(n, "%s: want a number, got %q", what, s)
			return
		}
		v.SetFloat(f)
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			d.Errs.At(n, "%s: %v", what, err)
			return
		}
		v.Set(reflect.ValueOf(&x).Elem())
	default:
		d.Errs.At(n, "%s: cannot decode into %s", what, v.Type())
	}
}

func (d *Decoder) decodeStruct(n *yaml.Node, vals []reflect.Value, what string) {
	type field struct {
		v      reflect.Value
		f      reflect.StructField
		seen   bool
		secret bool
	}
	byName := map[string]*field{}
	var order []string
	var collect func(sv reflect.Value)
	collect = func(sv reflect.Value) {
		t := sv.Type()
		for i := 0; i < t.NumField(); i++ {
			if inline(t.Field(i)) {
				collect(sv.Field(i))
				continue
			}
			name := fieldName(t.Field(i))
			if name == "" {
				continue
			}
			if _, dup := byName[name]; dup {
				continue
			}
			byName[name] = &field{v: sv.Field(i), f: t.Field(i), secret: t.Field(i).Tag.Get("secret") == "true"}
			order = append(order, name)
		}
	}
	for _, sv := range vals {
		collect(sv)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], resolveAlias(n.Content[i+1])
		f, ok := byName[k.Value]
		if !ok {
			d.Errs.At(k, "unknown key %q in %s%s; known: %s", k.Value, what, Suggest(k.Value, order), strings.Join(order, ", "))
			continue
		}
		if f.seen {
			d.Errs.At(k, "key %q given twice in %s", k.Value, what)
			continue
		}
		f.seen = true
		d.decode(val, f.v, fmt.Sprintf("%s: %s", what, k.Value), f.secret)
	}
	for _, name := range order {
		f := byName[name]
		if !f.seen && f.f.Tag.Get("required") == "true" {
			d.Errs.At(n, "%s needs %q (%s)", what, name, f.f.Tag.Get("doc"))
		}
	}
}

// ParseDuration reads a Go duration ("90s", "1m30s", "12h") and also days
// ("2d"), refusing a bare number because its unit would be a guess.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if f, err := strconv.ParseFloat(days, 64); err == nil && f >= 0 {
			return time.Duration(f * float64(24*time.Hour)), nil
		}
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return 0, fmt.Errorf("duration %q needs a unit, such as %ss or %sms", s, s, s)
		}
		return 0, fmt.Errorf("bad duration %q; write it like 500ms, 30s, 15m, 12h or 2d", s)
	}
	if dur < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return dur, nil
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") || n.Kind == 0
}

// IsNull reports whether a node is absent or an explicit null.
func IsNull(n *yaml.Node) bool { return isNull(resolveAlias(n)) }

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return fmt.Sprintf("value (%q)", n.Value)
	}
	return "nothing"
}

// Mapping iterates a mapping node's pairs in file order, reporting an error
// if n is not a mapping. Keys are interpolated.
func (d *Decoder) Mapping(n *yaml.Node, what string, each func(key string, k, v *yaml.Node)) {
	n = resolveAlias(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.Errs.At(n, "%s must be a mapping, not a %s", what, kindName(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolveAlias(n.Content[i+1])
		key, ok := d.Scalar(k, what+" key")
		if !ok {
			continue
		}
		if seen[key] {
			d.Errs.At(k, "%q given twice in %s", key, what)
			continue
		}
		seen[key] = true
		each(key, k, v)
	}
}
