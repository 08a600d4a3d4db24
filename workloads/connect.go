package workloads

import (
	"context"
	"fmt"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/metrics"
)

// Connect holds idle connections (connection-scale tests).
type Connect struct {
	lifecycle
	name   string
	opts   any
	target drivers.Target
	env    *Env
}

// NewConnect prepares a connect workload.
func NewConnect(name string, opts any, target drivers.Target, env *Env) *Connect {
	c := &Connect{name: name, opts: opts, target: target, env: env}
	c.rec = metrics.NewRecorder(name, "connect")
	return c
}

func (c *Connect) Name() string                { return c.name }
func (c *Connect) Recorder() *metrics.Recorder { return c.rec }

// Start opens the connections (at the driver's connect rate) and holds them until Stop.
func (c *Connect) Start(ctx context.Context) error {
	conn, ok := drivers.As[drivers.Connector](c.target)
	if !ok {
		return fmt.Errorf("workload %q: this target cannot hold idle connections", c.name)
	}
	wctx, err := c.begin(ctx, c.name)
	if err != nil {
		return err
	}
	conns, err := conn.Connect(wctx, drivers.ConnectSpec{Workload: c.name, Options: c.opts})
	if err != nil {
		c.finish()
		return fmt.Errorf("workload %q: %w", c.name, err)
	}
	c.rec.SetGauges(conns.Gauges)
	go func() {
		<-wctx.Done()
		if err := conns.Close(); err != nil {
			c.env.Warn(fmt.Sprintf("workload %q: closing connections: %v", c.name, err))
		}
		c.finish()
	}()
	return nil
}
