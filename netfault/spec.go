package netfault

import (
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/yamldecode"
)

// Options are the keys that set a link's condition, in a target's proxy:
// section (for the whole run) and in a network step (for a while).
type Options struct {
	Latency   time.Duration `yaml:"latency" doc:"added to every round trip between the clients and the broker: data from the broker is held this long, so acknowledgements and deliveries come this much later (whole milliseconds)"`
	Jitter    time.Duration `yaml:"jitter" doc:"varies the latency of each piece of data uniformly within ±jitter (at most latency; TCP data keeps its order)"`
	Bandwidth Bandwidth     `yaml:"bandwidth" doc:"limit of each direction of every connection, such as 1MB/s (10^6 bytes/s), 250kB/s or 10Mbit/s; whole kB/s"`
}

// Condition is the link condition the options set.
func (o Options) Condition() Condition {
	return Condition(o)
}

// Spec is a target's proxy: key: true, or a mapping of the condition the
// link is in for the whole run.
type Spec struct {
	On bool
	Options
}

// PlanType names the type in `planrun explain` and the README.
func (Spec) PlanType() string { return "true or mapping" }

// PlanAlternatives are the shapes proxy: takes, for the plan schema.
func (Spec) PlanAlternatives() []any { return []any{false, Options{}} }

// UnmarshalPlan reads true, false or a mapping of options.
func (s *Spec) UnmarshalPlan(d *yamldecode.Decoder, n *yaml.Node) {
	*s = Spec{}
	if n.Kind == yaml.MappingNode {
		s.On = true
		d.Decode(n, &s.Options, "proxy")
		if err := s.Condition().Check(); err != nil {
			d.Errs.At(n, "proxy: %v", err)
		}
		return
	}
	d.Decode(n, &s.On, "proxy")
}
