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
}

// NewConnect prepares a connect workload.
func NewConnect(name string, opts any, target drivers.Target, env *Shared) *Connect {
	c := &Connect{name: name, opts: opts, target: target}
	c.env = env
	c.rec = metrics.NewRecorder(name, connectKind.Name, connectKind.Role)
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
	conns, err := conn.Connect(wctx, drivers.ConnectSpec{Workload: c.name, Options: c.opts, Events: newSink(c.rec, 0, 1)})
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

var connectKind = Kind{Name: "connect", Doc: "hold idle connections (drivers that support it)", Role: metrics.Role{Connects: true},
	New: func() Section { return &ConnectSection{} }}

func init() { RegisterKind(connectKind) }

// ConnectSection is a workload's connect: section: the driver's produce
// options (clients, connect rate...) and nothing else.
type ConnectSection struct {
	Opts any
}

// Decode checks that the driver can hold connections and reads its options.
func (s *ConnectSection) Decode(c *Decoding) {
	s.Opts = ProduceOptions(c.Target.Driver)
	if cc, ok := c.Target.Driver.(drivers.ConnectCapable); !ok || !cc.CanConnect() {
		c.Errorf("driver %q cannot hold idle connections", c.Target.DriverName)
		return
	}
	c.D.DecodeStructs(c.Node, c.What, s.Opts)
	c.CheckOptions(c.Target.Driver, s.Opts, c.What)
}

// Build makes the connect workload.
func (s *ConnectSection) Build(b *Build) (Workload, error) {
	return NewConnect(b.Name, s.Opts, b.Targets(b.Target), b.Shared), nil
}
