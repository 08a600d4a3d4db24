// Package units parses and prints the sizes and rates plans and reports use.
// MB means 10^6 bytes and MiB 2^20 bytes, everywhere.
package units

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Size is a number of bytes. In a plan it is written with a unit: 200B, 1KB
// (1000 bytes), 1KiB (1024 bytes), 100GB, 1.5GiB. A bare number is bytes.
type Size int64

var sizeUnits = []struct {
	suffix string
	mult   float64
}{
	// Longest suffixes first so "KiB" is not read as "B".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"kB", 1e3}, {"B", 1},
}

// ParseSize reads a size such as "1KiB" or "100GB".
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty size; want a number with a unit such as 1KiB, 200B or 100GB")
	}
	mult := 1.0
	num := t
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			mult = u.mult
			num = strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("bad size %q; want a number with a unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("size %q is negative", s)
	}
	b := v * mult
	if b > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return Size(math.Round(b)), nil
}

// String prints the size exactly when it is a whole number of a binary or
// decimal unit, else in bytes, so it parses back to the same value.
func (s Size) String() string {
	n := int64(s)
	if n == 0 {
		return "0B"
	}
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"TB", 1e12}, {"GiB", 1 << 30}, {"GB", 1e9}, {"MiB", 1 << 20}, {"MB", 1e6}, {"KiB", 1 << 10}, {"KB", 1e3}} {
		if n%u.mult == 0 {
			return fmt.Sprintf("%d%s", n/u.mult, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", n)
}

// MB converts bytes to decimal megabytes (10^6 bytes).
func MB(bytes float64) float64 { return bytes / 1e6 }

// Human prints a byte count in decimal units with two decimals (reports say MB = 10^6 bytes).
func Human(bytes float64) string {
	switch {
	case bytes >= 1e12:
		return fmt.Sprintf("%.2f TB", bytes/1e12)
	case bytes >= 1e9:
		return fmt.Sprintf("%.2f GB", bytes/1e9)
	case bytes >= 1e6:
		return fmt.Sprintf("%.2f MB", bytes/1e6)
	case bytes >= 1e3:
		return fmt.Sprintf("%.2f KB", bytes/1e3)
	}
	return fmt.Sprintf("%.0f B", bytes)
}

// Value prints a value for people, never in Go's syntax: a number in plain
// decimal notation (six significant digits, whole numbers whole, NaN as
// n/a), a string as it is (quoted when it is empty or holds blanks, '=',
// ',' or quotes), a list as "a, b", and a group of values (a map or a
// struct) as key=value pairs in key order, nested groups as key.sub=value.
func Value(v any) string {
	if pairs := flatten("", reflect.ValueOf(v)); pairs != nil {
		if len(pairs) == 0 {
			return "none"
		}
		out := make([]string, len(pairs))
		for i, p := range pairs {
			out[i] = p[0] + "=" + p[1]
		}
		return strings.Join(out, " ")
	}
	return scalar(reflect.ValueOf(v))
}

// flatten lists the key=value pairs of a map or struct (nil for any other
// value), sorted by key.
func flatten(prefix string, v reflect.Value) [][2]string {
	v = deref(v)
	if !v.IsValid() {
		return nil
	}
	if _, ok := v.Interface().(fmt.Stringer); ok {
		return nil
	}
	var keys []string
	vals := map[string]reflect.Value{}
	switch v.Kind() {
	case reflect.Map:
		for _, k := range v.MapKeys() {
			name := scalar(k)
			keys = append(keys, name)
			vals[name] = v.MapIndex(k)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			keys = append(keys, name)
			vals[name] = v.Field(i)
		}
	default:
		return nil
	}
	sort.Strings(keys)
	out := [][2]string{}
	for _, k := range keys {
		if sub := flatten(prefix+k+".", vals[k]); sub != nil {
			out = append(out, sub...)
			continue
		}
		val := scalar(vals[k])
		if kind := deref(vals[k]).Kind(); kind == reflect.Slice || kind == reflect.Array {
			val = "[" + val + "]"
		}
		out = append(out, [2]string{prefix + k, val})
	}
	return out
}

// scalar prints a value that is not a group; a list as "a, b".
func scalar(v reflect.Value) string {
	v = deref(v)
	if !v.IsValid() || (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
		return "none"
	}
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String()
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		return number(v.Float())
	case reflect.String:
		s := v.String()
		if s == "" || strings.ContainsAny(s, " \t\n\"'=,") || !strconv.CanBackquote(s) {
			return strconv.Quote(s)
		}
		return s
	case reflect.Slice, reflect.Array:
		parts := make([]string, v.Len())
		for i := range parts {
			if pairs := flatten("", v.Index(i)); pairs != nil {
				parts[i] = "{" + Value(v.Index(i).Interface()) + "}"
				continue
			}
			parts[i] = scalar(v.Index(i))
		}
		return strings.Join(parts, ", ")
	case reflect.Map, reflect.Struct:
		return "{" + Value(v.Interface()) + "}"
	}
	return fmt.Sprint(v.Interface())
}

// number prints a float with up to six significant digits and no exponent.
func number(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	s := strconv.FormatFloat(f, 'g', 6, 64)
	if strings.ContainsAny(s, "e") {
		s = strconv.FormatFloat(f, 'f', -1, 64)
	}
	return s
}

// deref follows pointers and interfaces to the value they hold.
func deref(v reflect.Value) reflect.Value {
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && !v.IsNil() {
		v = v.Elem()
	}
	return v
}

// Labelled is "name = value" for a single value and "name: key=value ..."
// for a group of values, as reports and progress lines list probes.
func Labelled(name string, v any) string {
	if pairs := flatten("", reflect.ValueOf(v)); len(pairs) > 0 {
		return name + ": " + Value(v)
	}
	return name + " = " + Value(v)
}
