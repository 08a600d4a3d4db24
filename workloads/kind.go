package workloads

import (
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/registry"
	"github.com/planrun/planrun/yamldecode"
)

// Kind is a registered kind of workload: the key that selects it under a
// workload (produce:, consume:...), what it does, and how its section is
// decoded and built. Metrics, reports and charts ask a kind's Role instead
// of comparing kind names, so adding a kind touches this package only.
type Kind struct {
	Name string
	Doc  string
	Role metrics.Role
	// Keys are structs whose tagged fields are the section's own keys
	// (beside the driver's), for `planrun explain` and the README.
	Keys []any
	// New returns an empty section of this kind to decode into.
	New func() Section
	// Settable are the keys a `set` step may change while a workload of
	// this kind runs, each with a fresh value to decode the new setting
	// into (a pointer); the workload implements Setter.
	Settable map[string]func() any
}

// Setter is a workload whose settings change while it runs.
type Setter interface {
	// Set applies a value decoded for one of its kind's Settable keys.
	Set(key string, value any) error
}

// Section is one workload's kind section as the plan gives it.
type Section interface {
	// Decode reads the section, reporting problems through c.D.Errs.
	Decode(c *Decoding)
	// Build makes the workload for one run.
	Build(b *Build) (Workload, error)
}

var kinds = registry.New[Kind]("workload kind")

// RegisterKind makes a workload kind available to plans. Called from init.
func RegisterKind(k Kind) { kinds.Register(k.Name, k) }

// LookupKind returns the kind registered under name.
func LookupKind(name string) (Kind, bool) { return kinds.Lookup(name) }

// Kinds lists the registered kinds in the order plans and messages list
// them: kinds that send, then those that receive, relay, and connect; by
// name within each.
func Kinds() []Kind {
	all := kinds.All()
	rank := func(k Kind) int {
		switch r := k.Role; {
		case r.Relays():
			return 2
		case r.Sends:
			return 0
		case r.Receives:
			return 1
		}
		return 3
	}
	slices.SortStableFunc(all, func(a, b Kind) int { return rank(a) - rank(b) })
	return all
}

// Endpoint is a target as the plan declares it, before anything is opened.
type Endpoint struct {
	Name       string
	DriverName string
	Driver     drivers.Driver
}

// Decoding is what a section sees while the plan loads.
type Decoding struct {
	D    *yamldecode.Decoder
	Node *yaml.Node // the section's value
	// What names the section in errors: workload "producer" produce.
	What string
	// Target is the workload's target.
	Target Endpoint
	// Resolve finds another target by name (a relay's destination). It
	// reports an unknown name itself and returns false then.
	Resolve func(n *yaml.Node, name, what string) (Endpoint, bool)
}

// Errorf reports a problem at the section.
func (c *Decoding) Errorf(format string, args ...any) {
	c.D.Errs.At(c.Node, "%s: %s", c.What, fmt.Sprintf(format, args...))
}

// CheckOptions lets the driver check options decoded from this section
// (what names them in errors).
func (c *Decoding) CheckOptions(drv drivers.Driver, opts any, what string) {
	ch, ok := drv.(drivers.ConfigChecker)
	if !ok || opts == nil {
		return
	}
	if err := ch.CheckConfig(opts); err != nil {
		c.D.Errs.At(c.Node, "%s: %v", what, err)
	}
}

// ProduceOptions returns a fresh produce-options value of the driver, or nil.
func ProduceOptions(drv drivers.Driver) any {
	if o, ok := drv.(drivers.ProduceOptioner); ok {
		return o.NewProduceOptions()
	}
	return nil
}

// ConsumeOptions returns a fresh consume-options value of the driver, or nil.
func ConsumeOptions(drv drivers.Driver) any {
	if o, ok := drv.(drivers.ConsumeOptioner); ok {
		return o.NewConsumeOptions()
	}
	return nil
}

// Build is what a section gets to make its workload for one run.
type Build struct {
	Name string
	// ID is unique among the run's workloads: producers use it as their
	// stream id in message headers.
	ID uint16
	// Target is the workload's target name; Targets resolves any target.
	Target  string
	Targets func(name string) drivers.Target
	Shared  *Shared
}

// report adds what a spec's Check found to the decoding's errors.
func (c *Decoding) report(problems []string) {
	for _, p := range problems {
		c.Errorf("%s", p)
	}
}

// decodeChecked decodes the section into a generic spec and the target
// driver's options, then checks both.
func (c *Decoding) decodeChecked(spec interface{ Check() []string }, opts any) {
	c.D.DecodeStructs(c.Node, c.What, spec, opts)
	c.report(spec.Check())
	c.CheckOptions(c.Target.Driver, opts, c.What)
}
