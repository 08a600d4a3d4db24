package steps

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/plan"
)

func init() {
	plan.RegisterStep(plan.StepKind{Name: "broker", Doc: "stop, start or restart the embedded broker of a target (url: embedded, nameservers: embedded, brokers: embedded): `broker: restart` with `target: mq` and `down: 5s`; outside brokers are restarted with exec or kill", New: func() plan.Step { return &Broker{} }})
}

// brokerActions are what a broker step may do.
var brokerActions = []string{"stop", "start", "restart"}

// Broker stops and starts a target's embedded broker, so that plans can
// rehearse an outage on a laptop: clients lose their connections, retry,
// and reconnect once it is back.
type Broker struct {
	Action  string        `yaml:"broker" required:"true" doc:"stop, start or restart"`
	Target  string        `yaml:"target" required:"true" doc:"the target whose embedded broker it is"`
	Down    time.Duration `yaml:"down" default:"0s" doc:"restart only: how long the broker stays stopped before it starts again"`
	Timeout time.Duration `yaml:"timeout" default:"30s" doc:"how long stopping or starting may take"`
}

// Check checks the action and that the target runs an embedded broker.
func (b *Broker) Check(c *plan.CheckContext) {
	if !slices.Contains(brokerActions, b.Action) {
		c.Errs.At(keyValue(c, "broker"), "broker: %q is not an action; use %s", b.Action, strings.Join(brokerActions, ", "))
	}
	if b.Down < 0 {
		c.Errs.At(keyValue(c, "down"), "broker: down %s is negative", b.Down)
	}
	if b.Down > 0 && b.Action != "restart" {
		c.Errs.At(keyValue(c, "down"), "broker: down is for restart only")
	}
	if b.Target == "" {
		return
	}
	t := knownTarget(c, keyValue(c, "target"), "broker", b.Target)
	if t == nil {
		return
	}
	if e, ok := t.Config.(drivers.EmbeddedConfig); !ok || !e.RunsEmbedded() {
		c.Errs.At(keyValue(c, "target"), "broker: target %q does not run an embedded broker; stop an outside broker with kill (pidfile) or exec (systemctl restart mosquitto, kubectl delete pod ...)", b.Target)
	}
}

// Describe names the step in output.
func (b *Broker) Describe() string {
	if b.Action == "restart" && b.Down > 0 {
		return fmt.Sprintf("restart the embedded broker of %s (down %s)", b.Target, b.Down)
	}
	return fmt.Sprintf("%s the embedded broker of %s", b.Action, b.Target)
}

// Run stops and/or starts the broker.
func (b *Broker) Run(ctx context.Context, r plan.Runtime) error {
	bc, ok := drivers.As[drivers.BrokerController](r.Target(b.Target))
	if !ok {
		return fmt.Errorf("broker: target %q cannot stop and start its broker", b.Target)
	}
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	do := func(what string, f func(context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		start := time.Now()
		if err := f(cctx); err != nil {
			return fmt.Errorf("broker: %s %s: %w", what, b.Target, err)
		}
		r.Printf("broker %s: %s (%.0f ms)\n", b.Target, what, float64(time.Since(start))/1e6)
		return nil
	}
	if b.Action == "stop" || b.Action == "restart" {
		if err := do("stopped", bc.StopBroker); err != nil {
			return err
		}
	}
	if b.Action == "restart" && b.Down > 0 {
		r.SetStatus(fmt.Sprintf("broker %s down for %s", b.Target, b.Down))
		tm := time.NewTimer(b.Down)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
			// Interrupted: the run still ends with the broker up.
			_ = do("started", bc.StartBroker)
			return context.Cause(ctx)
		}
	}
	if b.Action == "start" || b.Action == "restart" {
		return do("started", bc.StartBroker)
	}
	return nil
}
