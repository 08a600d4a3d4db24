package drivers_test

import (
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/drivers"
	_ "github.com/planrun/planrun/drivers/kafka"
	_ "github.com/planrun/planrun/drivers/memory"
	_ "github.com/planrun/planrun/drivers/mqtt"
	_ "github.com/planrun/planrun/drivers/nats"
	_ "github.com/planrun/planrun/drivers/redis"
	_ "github.com/planrun/planrun/drivers/rocketmq"
	"github.com/planrun/planrun/yamldecode"
)

// The manual is generated from these tags: every key a plan may set has a
// doc, and every default is written as a plan would write it.
func TestConfigTags(t *testing.T) {
	var walk func(where string, typ reflect.Type)
	walk = func(where string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if key == "" || key == "-" {
				continue
			}
			what := where + "." + key
			if f.Tag.Get("doc") == "" {
				t.Errorf("%s has no doc tag", what)
			}
			if def, ok := f.Tag.Lookup("default"); ok {
				d := yamldecode.NewDecoder("tags", nil)
				d.Decode(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: def}, reflect.New(f.Type).Interface(), what)
				if err := d.Errs.Err(); err != nil {
					t.Errorf("%s: default %q does not decode: %v", what, def, err)
				}
			}
			if ft := f.Type; ft.Kind() == reflect.Struct && strings.HasPrefix(ft.PkgPath(), "github.com/planrun/") {
				walk(what, ft)
			}
		}
	}
	for _, name := range drivers.Names() {
		d, _ := drivers.Lookup(name)
		walk(name, reflect.TypeOf(d.NewTargetConfig()))
		if o, ok := d.(drivers.ProduceOptioner); ok && o.NewProduceOptions() != nil {
			walk(name+" produce", reflect.TypeOf(o.NewProduceOptions()))
		}
		if o, ok := d.(drivers.ConsumeOptioner); ok && o.NewConsumeOptions() != nil {
			walk(name+" consume", reflect.TypeOf(o.NewConsumeOptions()))
		}
	}
}
