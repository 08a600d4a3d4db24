package mqtt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/planrun/planrun/drivers"
)

// timers are reused by sends: a stopped timer's channel holds no stale
// value (Go 1.23 timers), so Reset makes it new.
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// Producer publishes from a fleet of clients: a message goes out on client
// Source mod clients, to the workload's topic with {client} expanded for
// that client.
type Producer struct {
	f        *fleet
	topic    string
	workload string
	qos      byte
	retain   bool
	timeout  time.Duration
}

// Sources implements drivers.Sourcer.
func (p *Producer) Sources() int { return len(p.f.members) }

// Gauges implements drivers.Gauger.
func (p *Producer) Gauges() map[string]float64 { return p.f.gauges() }

// Send implements drivers.Producer. It returns when the broker acknowledged
// the message (PUBACK for QoS 1, PUBCOMP for QoS 2) or, for QoS 0, when it
// was written to the connection.
func (p *Producer) Send(ctx context.Context, m *drivers.Message) error {
	i := p.client(m)
	tm := timers.Get().(*time.Timer)
	tm.Reset(p.timeout)
	defer func() { tm.Stop(); timers.Put(tm) }()
	if err := p.f.wait(ctx, i, tm.C); err != nil {
		return err
	}
	mem := &p.f.members[i]
	topic := p.topicOf(m, i)
	if lc, ok := mem.client.(*leanClient); ok {
		switch err := lc.publishWait(ctx, topic, p.qos, p.retain, m.Value, tm.C); {
		case err == nil:
			return nil
		case errors.Is(err, errNoAck):
			return fmt.Errorf("mqtt: no acknowledgement from the broker within %s (client %d)", p.timeout, i)
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			return err
		default:
			return fmt.Errorf("mqtt: publish on client %d: %w", i, err)
		}
	}
	tok := mem.client.Publish(topic, p.qos, p.retain, m.Value)
	select {
	case <-tok.Done():
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return fmt.Errorf("mqtt: no acknowledgement from the broker within %s (client %d)", p.timeout, i)
	}
	if err := tok.Error(); err != nil {
		return fmt.Errorf("mqtt: publish on client %d: %w", i, err)
	}
	return nil
}

// Close disconnects the producer's clients.
func (p *Producer) Close() error { return p.f.Close() }

// WaitReady implements drivers.Readier: it returns once every client has
// connected for the first time.
func (p *Producer) WaitReady(ctx context.Context) error {
	for i := range p.f.members {
		if err := p.f.wait(ctx, i, nil); err != nil {
			return err
		}
	}
	return nil
}
