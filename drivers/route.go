package drivers

import (
	"context"
	"errors"
	"io"
	"net"
)

// Router maps the address of a broker to the address a target's clients
// dial instead: the listener of a proxy in front of that broker, made on
// first use, so that every connection, also to brokers the first one named
// (Kafka metadata), crosses the proxy. A plan's proxy: key gives a target
// one (package netfault).
type Router interface {
	Route(addr string) (string, error)
}

// Routable is a target config whose driver dials every broker address
// through the Router it is given; the plan loader accepts proxy: only for
// these. Drivers embed Routing in their target config to be one.
type Routable interface {
	SetRouter(r Router)
}

// Routing is embedded in a driver's target config: it holds the Router a
// plan's proxy: gives the target (none by default) and dials through it.
type Routing struct {
	router Router
}

// SetRouter implements Routable.
func (r *Routing) SetRouter(x Router) { r.router = x }

// Routed reports whether connections go through a Router.
func (r *Routing) Routed() bool { return r.router != nil }

// Route returns the address to dial for a broker's address: addr itself
// without a Router.
func (r *Routing) Route(addr string) (string, error) {
	if r.router == nil {
		return addr, nil
	}
	return r.router.Route(addr)
}

// Dial connects to addr with d, through the Router when there is one.
func (r *Routing) Dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	to, err := r.Route(addr)
	if err != nil {
		return nil, err
	}
	return d.DialContext(ctx, network, to)
}

// Dialer returns a dialer that connects with d through the Router: the
// Dial(network, addr) that client libraries take as a custom dialer
// (sarama, nats.go).
func (r *Routing) Dialer(d *net.Dialer) RoutedDialer { return RoutedDialer{d: d, r: *r} }

// RoutedDialer dials through a target's Router.
type RoutedDialer struct {
	d *net.Dialer
	r Routing
}

// Dial connects to addr, through the Router when there is one.
func (x RoutedDialer) Dial(network, addr string) (net.Conn, error) {
	return x.r.Dial(context.Background(), x.d, network, addr)
}

// WithRouter attaches r to an opened target: RouterOf finds it again (the
// network step) and Close closes r after t when r is an io.Closer.
func WithRouter(t Target, r Router) Target { return routedTarget{t, r} }

// RouterOf returns the Router attached to t with WithRouter.
func RouterOf(t Target) (Router, bool) {
	for t != nil {
		if w, ok := t.(routedTarget); ok {
			return w.router, true
		}
		u, ok := t.(interface{ unwrap() any })
		if !ok {
			return nil, false
		}
		t, _ = u.unwrap().(Target)
	}
	return nil, false
}

type routedTarget struct {
	Target
	router Router
}

func (w routedTarget) unwrap() any { return w.Target }

func (w routedTarget) Close() error {
	err := w.Target.Close()
	if c, ok := w.router.(io.Closer); ok {
		err = errors.Join(err, c.Close())
	}
	return err
}

// Describe implements Describer: the target's own description, and that
// its clients go through the proxy.
func (w routedTarget) Describe() string {
	what := "through an in-process proxy"
	if d, ok := As[Describer](w.Target); ok {
		return d.Describe() + " " + what
	}
	return what
}
