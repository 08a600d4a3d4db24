package metrics

import (
	"encoding/json"
	"math"
	"reflect"
	"sync"
)

// NA is a figure that was not measured: no latency on a row without
// messages, no per-second maximum in a phase shorter than a second. It is
// NaN in Go, null in JSON and "n/a" in reports; an expression comparing it
// fails and says so.
var NA = math.NaN()

// IsNA reports whether a figure was not measured.
func IsNA(v float64) bool { return math.IsNaN(v) }

// MarshalJSON writes figures that were not measured as null.
func (s Stats) MarshalJSON() ([]byte, error) { return marshalNA(reflect.ValueOf(s)) }

// UnmarshalJSON reads null figures back as not measured; figures that an
// older result does not have read as 0.
func (s *Stats) UnmarshalJSON(b []byte) error { return unmarshalNA(b, reflect.ValueOf(s).Elem()) }

// MarshalJSON writes the percentiles of an empty window as null.
func (l Latency) MarshalJSON() ([]byte, error) { return marshalNA(reflect.ValueOf(l)) }

// UnmarshalJSON reads null percentiles back as not measured.
func (l *Latency) UnmarshalJSON(b []byte) error { return unmarshalNA(b, reflect.ValueOf(l).Elem()) }

var floatPtr = reflect.TypeOf((*float64)(nil))

// shadows are struct types like the figures' own with *float64 in place of
// float64, which encoding/json writes as null when nil.
var shadows sync.Map // reflect.Type -> reflect.Type

func shadowOf(t reflect.Type) reflect.Type {
	if s, ok := shadows.Load(t); ok {
		return s.(reflect.Type)
	}
	fields := make([]reflect.StructField, t.NumField())
	for i := range fields {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Float64 {
			f.Type = floatPtr
		}
		fields[i] = reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag}
	}
	s := reflect.StructOf(fields)
	shadows.Store(t, s)
	return s
}

func marshalNA(v reflect.Value) ([]byte, error) {
	sv := reflect.New(shadowOf(v.Type())).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() != reflect.Float64 {
			sv.Field(i).Set(f)
			continue
		}
		if x := f.Float(); !math.IsNaN(x) && !math.IsInf(x, 0) {
			sv.Field(i).Set(reflect.ValueOf(&x))
		}
	}
	return json.Marshal(sv.Interface())
}

func unmarshalNA(b []byte, v reflect.Value) error {
	sp := reflect.New(shadowOf(v.Type()))
	sv := sp.Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).Kind() == reflect.Float64 {
			sv.Field(i).Set(reflect.ValueOf(new(float64)))
		}
	}
	if err := json.Unmarshal(b, sp.Interface()); err != nil {
		return err
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() != reflect.Float64 {
			f.Set(sv.Field(i))
			continue
		}
		if p := sv.Field(i).Interface().(*float64); p != nil {
			f.SetFloat(*p)
		} else {
			f.SetFloat(NA)
		}
	}
	return nil
}

// orNA is the latency of a window in which count messages were timed: not
// measured when there were none.
func (l Latency) orNA(count int64) Latency {
	if count > 0 && l.Count > 0 {
		return l
	}
	return Latency{Avg: NA, Min: NA, P50: NA, P90: NA, P95: NA, P99: NA, P999: NA, Max: NA}
}
