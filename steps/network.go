package steps

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/netfault"
	"github.com/planrun/planrun/plan"
)

func init() {
	plan.RegisterStep(plan.StepKind{Name: "network", Doc: "degrade the link between the workloads and a target's brokers (a target with proxy:): `network: {target: mq, latency: 200ms, jitter: 20ms, for: 30s}`; also bandwidth:, reset:, cut:, and restore: to end a fault given without for:", New: func() plan.Step { return &Network{} }})
}

// Network lays a fault over the link of a target reached through its
// proxy (proxy:): latency, jitter and a bandwidth limit slow the data
// without dropping a connection; reset and cut drop connections, which the
// workloads record as outages.
type Network struct {
	Fault NetworkFault `yaml:"network" required:"true" doc:"the target and the fault, such as {target: mq, latency: 200ms, for: 30s}"`
	// workloads are those of the target, which record the fault as events.
	workloads []string
}

// NetworkFault is what a network step does.
type NetworkFault struct {
	Target           string `yaml:"target" required:"true" doc:"the target whose link it degrades; it needs proxy: true"`
	netfault.Options `yaml:",inline"`
	Reset            bool          `yaml:"reset" doc:"reset every connection as soon as data crosses it, new ones too, while the fault lasts (clients see their connections drop and reconnect)"`
	Cut              bool          `yaml:"cut" doc:"cut the link: every connection is closed and new ones are refused while the fault lasts"`
	For              time.Duration `yaml:"for" doc:"how long the fault lasts: the step waits that long, then restores the link; without for: the fault stays while the next steps run, until a network step with restore: true or the end of the run"`
	Restore          bool          `yaml:"restore" doc:"end the fault in place: the link is back to the condition of its proxy: section"`
}

func (f NetworkFault) fault() netfault.Fault {
	return netfault.Fault{Condition: f.Condition(), Reset: f.Reset, Cut: f.Cut}
}

// networkNode is the value of key in the step's network: mapping (or the
// mapping itself), where errors about it point.
func networkNode(c *plan.CheckContext, key string) *yaml.Node {
	n := keyValue(c, "network")
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i+1]
			}
		}
	}
	return n
}

// Check checks the fault and that the target is reached through a proxy.
func (s *Network) Check(c *plan.CheckContext) {
	f := s.Fault
	at := func(key string) *yaml.Node { return networkNode(c, key) }
	slows := !f.Condition().Zero()
	kinds := 0
	for _, on := range []bool{slows, f.Reset, f.Cut, f.Restore} {
		if on {
			kinds++
		}
	}
	// A key besides target and for that did not decode, or is unknown,
	// has its own error already.
	given := false
	if n := at(""); n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i].Value; k != "target" && k != "for" {
				given = true
			}
		}
	}
	switch {
	case kinds == 0 && !given:
		c.Errs.At(at(""), "network: say what to do to the link: latency:, bandwidth:, reset: true, cut: true, or restore: true")
	case kinds > 1:
		c.Errs.At(at(""), "network: give one of latency/jitter/bandwidth, reset, cut or restore: a reset or cut link carries nothing to slow down, and restore ends a fault")
	}
	if err := f.Condition().Check(); err != nil {
		c.Errs.At(at("latency"), "network: %v", err)
	}
	if f.Restore && f.For > 0 {
		c.Errs.At(at("for"), "network: restore ends the fault in place at once; for: goes with the fault")
	}
	if len(c.Plan.Workers) > 0 {
		c.Errs.At(at("target"), "network: %s", s.LocalOnly())
	}
	if f.Target == "" {
		return
	}
	t := knownTarget(c, at("target"), "network", f.Target)
	if t == nil || t.Config == nil {
		return
	}
	if _, ok := t.Config.(drivers.Routable); !ok {
		c.Errs.At(at("target"), "network: target %q (driver %s) has no network link to degrade; network faults work with the drivers %s", f.Target, t.Driver, strings.Join(routableDrivers(), ", "))
		return
	}
	if !t.Proxy.On {
		c.Errs.At(at("target"), "network: target %q is not reached through a proxy; add proxy: true to targets.%s", f.Target, f.Target)
	}
	s.workloads = nil
	for _, w := range c.Plan.Workloads {
		if w.Target == f.Target {
			s.workloads = append(s.workloads, w.Name)
		}
	}
}

// LocalOnly implements plan.LocalStep: the proxy is in the process that
// opened the target, and workers open their own.
func (s *Network) LocalOnly() string {
	return "network faults act on the proxy in the process that runs the workloads; a run over workers cannot use them (run the plan without workers)"
}

// routableDrivers lists the drivers whose targets take proxy:.
func routableDrivers() []string {
	var out []string
	for _, name := range drivers.Names() {
		d, _ := drivers.Lookup(name)
		if _, ok := d.NewTargetConfig().(drivers.Routable); ok {
			out = append(out, name)
		}
	}
	return out
}

// Describe names the step in output.
func (s *Network) Describe() string {
	f := s.Fault
	if f.Restore {
		return "restore the link to " + f.Target
	}
	d := fmt.Sprintf("%s on the link to %s", f.fault(), f.Target)
	if f.For > 0 {
		d += " for " + f.For.String()
	}
	return d
}

// faultSetter is the proxy of a target with proxy:.
type faultSetter interface {
	Set(netfault.Fault) error
	Fault() netfault.Fault
}

// Run sets the fault, and with for: waits and restores the link.
func (s *Network) Run(ctx context.Context, r plan.Runtime) error {
	f := s.Fault
	tg := r.Target(f.Target)
	var link faultSetter
	if tg != nil {
		if rt, ok := drivers.RouterOf(tg); ok {
			link, _ = rt.(faultSetter)
		}
	}
	if link == nil {
		return fmt.Errorf("network: target %q is not reached through a proxy", f.Target)
	}
	if f.Restore {
		return s.restore(r, link)
	}
	if err := link.Set(f.fault()); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	s.event(r, metrics.EventNetworkFault, f.fault().String())
	r.Printf("network %s: %s\n", f.Target, f.fault())
	if f.For <= 0 {
		return nil
	}
	r.SetStatus(fmt.Sprintf("%s for %s", f.fault(), f.For))
	tm := time.NewTimer(f.For)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
		// Interrupted: the run still ends with the link restored.
		_ = s.restore(r, link)
		return context.Cause(ctx)
	}
	return s.restore(r, link)
}

// restore ends the fault in place, if any, and records it.
func (s *Network) restore(r plan.Runtime, link faultSetter) error {
	was := link.Fault()
	if was == (netfault.Fault{}) {
		r.Printf("network %s: no fault in place\n", s.Fault.Target)
		return nil
	}
	if err := link.Set(netfault.Fault{}); err != nil {
		return fmt.Errorf("network: restoring the link to %s: %w", s.Fault.Target, err)
	}
	s.event(r, metrics.EventNetworkRestored, was.String())
	r.Printf("network %s: restored (was %s)\n", s.Fault.Target, was)
	return nil
}

// event records a network event on every workload of the target, so that
// it shows in the Events table beside what it did to them.
func (s *Network) event(r plan.Runtime, kind, reason string) {
	now := time.Now().UnixNano()
	for _, w := range r.Workloads(s.workloads) {
		w.Recorder().Event(metrics.ConnEvent{Kind: kind, Reason: reason, At: now})
	}
}
