// Package netfault puts an in-process TCP proxy (github.com/Shopify/toxiproxy)
// between a target's clients and its brokers, so that a plan can degrade
// the link while the load runs: latency and jitter, a bandwidth limit,
// connections reset, the link cut. A Link is a target's proxy: it makes a
// listener for every broker address the target's clients dial (drivers
// route every dial through it, also to the brokers a first one names), and
// applies the link's condition to all of them at once.
package netfault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Condition is how the link carries data: what a proxy: section sets for
// the whole run, and what a network step changes for a while.
type Condition struct {
	// Latency is added to every round trip: data from the broker to the
	// clients is held this long (toxiproxy's downstream latency), so a
	// send's acknowledgement and a message's delivery each come Latency
	// later.
	Latency time.Duration
	// Jitter varies the latency of each piece of data uniformly within
	// ±Jitter (order is kept: TCP data is never reordered).
	Jitter time.Duration
	// Bandwidth limits each direction of every connection, bytes/s.
	Bandwidth Bandwidth
}

// Zero reports whether the condition changes nothing.
func (c Condition) Zero() bool { return c == Condition{} }

// Check reports what the proxy cannot do as written.
func (c Condition) Check() error {
	switch {
	case c.Latency < 0 || c.Jitter < 0:
		return errors.New("latency and jitter cannot be negative")
	case c.Latency%time.Millisecond != 0 || c.Jitter%time.Millisecond != 0:
		return fmt.Errorf("latency %s, jitter %s: the proxy delays in whole milliseconds", c.Latency, c.Jitter)
	case c.Jitter > 0 && c.Latency == 0:
		return errors.New("jitter varies a latency: give latency too")
	case c.Jitter > c.Latency:
		return fmt.Errorf("jitter %s is larger than latency %s (data cannot arrive before it was sent)", c.Jitter, c.Latency)
	case c.Bandwidth < 0:
		return errors.New("bandwidth cannot be negative")
	case c.Bandwidth > 0 && c.Bandwidth%1000 != 0:
		return fmt.Errorf("bandwidth %s: the proxy limits in whole kB/s (1000 bytes/s), such as 1MB/s or 250kB/s", c.Bandwidth)
	}
	return nil
}

// String says what the condition does, as events and output name it.
func (c Condition) String() string {
	var parts []string
	if c.Latency > 0 {
		l := "latency " + c.Latency.String()
		if c.Jitter > 0 {
			l += " ±" + c.Jitter.String()
		}
		parts = append(parts, l)
	}
	if c.Bandwidth > 0 {
		parts = append(parts, "bandwidth "+c.Bandwidth.String())
	}
	return strings.Join(parts, ", ")
}

// over returns c with the fields f sets replaced.
func (c Condition) over(f Condition) Condition {
	if f.Latency > 0 {
		c.Latency, c.Jitter = f.Latency, f.Jitter
	}
	if f.Bandwidth > 0 {
		c.Bandwidth = f.Bandwidth
	}
	return c
}

// Fault is what a network step does to a link for a while: a condition
// laid over the link's own, connections reset, or the link cut.
type Fault struct {
	Condition
	// Reset: every connection is reset as soon as data crosses it, new
	// ones too, while the fault lasts.
	Reset bool
	// Cut: the link is down: every connection through it is closed and
	// new ones are refused while the fault lasts.
	Cut bool
}

// String says what the fault does.
func (f Fault) String() string {
	switch {
	case f.Cut:
		return "link cut"
	case f.Reset:
		return "connections reset"
	}
	return f.Condition.String()
}

// Link is a target's proxy: one toxiproxy listener per broker address,
// all in the same condition. Safe for concurrent use.
type Link struct {
	mu      sync.Mutex
	server  *toxiproxy.ApiServer
	proxies map[string]*toxiproxy.Proxy // broker address -> its proxy
	listen  map[string]string           // broker address -> listener address
	base    Condition
	fault   Fault
	closed  bool
}

// New returns a link with no listener yet whose data crosses in condition
// base until a fault changes it.
func New(base Condition) *Link {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	return &Link{server: srv, proxies: map[string]*toxiproxy.Proxy{}, listen: map[string]string{}, base: base}
}

// Route implements drivers.Router: the loopback address of the listener
// in front of addr, started on first use in the link's current condition.
func (l *Link) Route(addr string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return "", errors.New("netfault: the proxy is closed")
	}
	if a, ok := l.listen[addr]; ok {
		return a, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("netfault: broker address %q: %w", addr, err)
	}
	p := toxiproxy.NewProxy(l.server, fmt.Sprintf("planrun-%d", len(l.proxies)), "127.0.0.1:0", addr)
	if err := p.Start(); err != nil {
		return "", fmt.Errorf("netfault: proxy for %s: %w", addr, err)
	}
	l.proxies[addr] = p
	l.listen[addr] = p.Listen
	if err := l.apply(p); err != nil {
		return "", err
	}
	return p.Listen, nil
}

// Brokers lists the broker addresses the link has a listener for.
func (l *Link) Brokers() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.listen))
	for a := range l.listen {
		out = append(out, a)
	}
	return out
}

// Set lays f over the link's own condition on every connection, present
// and future, replacing the fault set before; a zero Fault clears it.
func (l *Link) Set(f Fault) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("netfault: the proxy is closed")
	}
	l.fault = f
	var errs []error
	for _, p := range l.proxies {
		errs = append(errs, l.apply(p))
	}
	return errors.Join(errs...)
}

// Fault is the fault in place (zero: none).
func (l *Link) Fault() Fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fault
}

// Close stops every listener and closes every connection through them.
func (l *Link) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	for _, p := range l.proxies {
		p.Stop()
	}
	return nil
}

// apply puts one proxy in the link's current state. Called with l.mu held.
func (l *Link) apply(p *toxiproxy.Proxy) error {
	if l.fault.Cut {
		p.Stop()
		return nil
	}
	if !p.Enabled {
		// The listener comes back on its address: clients dial it again.
		if err := p.Start(); err != nil {
			return fmt.Errorf("netfault: restoring the proxy for %s on %s: %w", p.Upstream, p.Listen, err)
		}
	}
	p.Toxics.ResetToxics(context.Background())
	c := l.base.over(l.fault.Condition)
	var add []toxic
	if c.Latency > 0 {
		add = append(add, toxic{Name: "latency", Type: "latency", Stream: "downstream",
			Attributes: map[string]int64{"latency": c.Latency.Milliseconds(), "jitter": c.Jitter.Milliseconds()}})
	}
	if c.Bandwidth > 0 {
		for _, s := range []string{"upstream", "downstream"} {
			add = append(add, toxic{Name: "bandwidth_" + s, Type: "bandwidth", Stream: s,
				Attributes: map[string]int64{"rate": int64(c.Bandwidth) / 1000}})
		}
	}
	if l.fault.Reset {
		for _, s := range []string{"upstream", "downstream"} {
			add = append(add, toxic{Name: "reset_" + s, Type: "reset_peer", Stream: s, Attributes: map[string]int64{"timeout": 0}})
		}
	}
	for _, t := range add {
		t.Toxicity = 1
		b, err := json.Marshal(t)
		if err != nil {
			return err
		}
		if _, err := p.Toxics.AddToxicJson(bytes.NewReader(b)); err != nil {
			return fmt.Errorf("netfault: %s on the proxy for %s: %w", t.Type, p.Upstream, err)
		}
	}
	return nil
}

// toxic is a toxic as toxiproxy reads it.
type toxic struct {
	Name       string           `json:"name"`
	Type       string           `json:"type"`
	Stream     string           `json:"stream"`
	Toxicity   float32          `json:"toxicity"`
	Attributes map[string]int64 `json:"attributes"`
}
