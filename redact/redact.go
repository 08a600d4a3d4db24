// Package redact keeps secrets (keys, passwords) out of everything planrun
// writes: progress lines, warnings, errors and every report.
package redact

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
)

// Redact replaces every secret value inside s. Longer secrets go first, so
// that a secret containing another ("abc" in "abcdef") leaves no tail.
func Redact(s string, secrets map[string]bool) string {
	var found []string
	for sec := range secrets {
		if sec != "" && strings.Contains(s, sec) {
			found = append(found, sec)
		}
	}
	if len(found) == 0 {
		return s
	}
	slices.SortFunc(found, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	for _, sec := range found {
		s = strings.ReplaceAll(s, sec, "[redacted]")
	}
	return s
}

// RedactAll replaces secret values in every string reachable from v (a
// pointer), so that no report, whatever a plan puts in descriptions, step
// names, messages or table cells, carries a secret.
func RedactAll(v any, secrets map[string]bool) {
	if len(secrets) == 0 {
		return
	}
	redactValue(reflect.ValueOf(v), secrets)
}

func redactValue(v reflect.Value, secrets map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			e := v.Elem()
			if v.Kind() == reflect.Interface && e.Kind() == reflect.String {
				if r := Redact(e.String(), secrets); r != e.String() && v.CanSet() {
					v.Set(reflect.ValueOf(r))
				}
				return
			}
			redactValue(e, secrets)
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(Redact(v.String(), secrets))
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				redactValue(v.Field(i), secrets)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			redactValue(v.Index(i), secrets)
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		for _, k := range v.MapKeys() {
			val := v.MapIndex(k)
			// Map values are not addressable: copy, redact, store back.
			cp := reflect.New(val.Type()).Elem()
			cp.Set(val)
			redactValue(cp, secrets)
			nk := k
			if k.Kind() == reflect.String {
				nk = reflect.ValueOf(Redact(k.String(), secrets)).Convert(k.Type())
			}
			if nk.Interface() != k.Interface() {
				v.SetMapIndex(k, reflect.Value{})
			}
			v.SetMapIndex(nk, cp)
		}
	}
}
