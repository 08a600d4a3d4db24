package plan

import (
	"context"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/expr"
	"github.com/planrun/planrun/registry"
	"github.com/planrun/planrun/yamldecode"
)

// CollectorConfig is a decoded collector section. Figures lists the names
// it provides (available in expressions as <collector>.<figure>); Open
// starts sampling.
type CollectorConfig interface {
	Figures() []string
	Open(ctx context.Context) (Sampler, error)
}

// Sampler reads a collector's figures once (called every second).
type Sampler interface {
	Sample(ctx context.Context) (map[string]float64, error)
	Close() error
}

// CollectorKind is a registered kind of collector (host, prometheus...).
type CollectorKind = registry.Kind[CollectorConfig]

var collectorKinds = registry.NewKinds[CollectorConfig]("collector kind")

// RegisterCollector makes a collector kind available to plans.
func RegisterCollector(k CollectorKind) { collectorKinds.Add(k) }

// CollectorKinds lists the registered collector kinds by name.
func CollectorKinds() []CollectorKind { return collectorKinds.All() }

// CollectorDef is a plan's collector.
type CollectorDef struct {
	Name     string
	Kind     string
	Required bool
	Config   CollectorConfig
}

// CollectorGeneric are a collector's keys besides its kind's own.
type CollectorGeneric struct {
	Kind     string `yaml:"kind" required:"true" doc:"collector kind"`
	Required bool   `yaml:"required" default:"false" doc:"end the run when a sample fails; otherwise the failure is reported once and sampling goes on"`
}

func (p *Plan) decodeCollectors(d *yamldecode.Decoder) {
	d.Mapping(p.keys["collectors"], "collectors", func(name string, k, v *yaml.Node) {
		what := fmt.Sprintf("collector %q", name)
		if expr.Reserved(name) || !validName(name) || p.Workload(name) != nil {
			d.Errs.At(k, "collector name %q is not allowed: use letters, digits and _, not a workload's name, and avoid %s", name, expr.ReservedList())
			return
		}
		if v.Kind != yaml.MappingNode {
			d.Errs.At(v, "%s must be a mapping with kind: and its settings", what)
			return
		}
		kindName := ""
		for i := 0; i+1 < len(v.Content); i += 2 {
			if v.Content[i].Value == "kind" {
				kindName, _ = d.Scalar(v.Content[i+1], what+": kind")
			}
		}
		names := collectorKinds.Names()
		kind, ok := collectorKinds.Lookup(kindName)
		if !ok {
			d.Errs.At(v, "%s: unknown kind %q%s; known: %s", what, kindName, yamldecode.Suggest(kindName, names), strings.Join(names, ", "))
			return
		}
		var g CollectorGeneric
		cfg := kind.New()
		d.DecodeStructs(v, what, &g, cfg)
		if c, ok := cfg.(interface{ Check() error }); ok {
			if err := c.Check(); err != nil {
				d.Errs.At(v, "%s: %v", what, err)
			}
		}
		p.Collectors = append(p.Collectors, &CollectorDef{Name: name, Kind: kindName, Required: g.Required, Config: cfg})
		p.Scope.Collectors[name] = cfg.Figures()
	})
}
