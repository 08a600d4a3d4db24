package drivers

import (
	"context"
	"fmt"
)

// TargetOf is what a driver made with Define opens. Its producers and
// consumers get the driver's own produce options P and consume options C,
// never nil: a workload without options gets zero ones (all defaults).
type TargetOf[P, C any] interface {
	NewProducer(ctx context.Context, spec ProducerSpec, opts *P) (Producer, error)
	NewConsumer(ctx context.Context, spec ConsumerSpec, opts *C) (Consumer, error)
	Close() error
}

// ConnectorOf is a TargetOf that can hold idle connections (the connect
// workload), configured by the driver's produce options.
type ConnectorOf[P any] interface {
	Connect(ctx context.Context, spec ConnectSpec, opts *P) (Connections, error)
}

// NoOptions stands for P or C in Define when a driver has no fields of its
// own in a workload's produce or consume section; any key there is then
// unknown to the plan loader.
type NoOptions struct{}

// Checker is a target config or options type with rules its field types
// cannot express. The plan loader calls Check once, after decoding; drivers
// then use the values without checking them again.
type Checker interface {
	Check() error
}

// Define makes a Driver of an open function that takes the driver's target
// config T and returns targets taking its produce options P and consume
// options C:
//
//	var Driver = drivers.Define(open) // open(context.Context, *Config) (*Target, error)
//
// The plan loader decodes plans into fresh T, P and C values from the
// Driver and checks those that implement Checker; the Driver then hands them
// to open and to the targets typed. Targets whose type implements
// ConnectorOf[P] accept connect workloads. caps (one value) declares what
// the driver can do (Capabilities): the conformance suite checks it and the
// manual prints it.
func Define[T, P, C any, X TargetOf[P, C]](open func(ctx context.Context, cfg *T) (X, error), caps ...Capabilities) Driver {
	_, connect := any(*new(X)).(ConnectorOf[P])
	d := defined[T, P, C, X]{open: open, connect: connect}
	for _, c := range caps {
		d.caps = c
	}
	return d
}

// defined is the untyped face of a driver made with Define, as the plan
// loader and the engine use it.
type defined[T, P, C any, X TargetOf[P, C]] struct {
	open    func(context.Context, *T) (X, error)
	connect bool
	caps    Capabilities
}

func (d defined[T, P, C, X]) Capabilities() Capabilities { return d.caps }

func (defined[T, P, C, X]) NewTargetConfig() any { return new(T) }

func (defined[T, P, C, X]) NewProduceOptions() any { return newOptions[P]() }

func (defined[T, P, C, X]) NewConsumeOptions() any { return newOptions[C]() }

func (d defined[T, P, C, X]) CanConnect() bool { return d.connect }

func (defined[T, P, C, X]) CheckConfig(cfg any) error {
	switch c := cfg.(type) {
	case *T:
		return check(c)
	case *P:
		return check(c)
	case *C:
		return check(c)
	}
	return fmt.Errorf("config is %T, want %T", cfg, (*T)(nil))
}

func (d defined[T, P, C, X]) Open(ctx context.Context, cfg any) (Target, error) {
	c, ok := cfg.(*T)
	if !ok || c == nil {
		return nil, fmt.Errorf("config is %T, want %T", cfg, (*T)(nil))
	}
	x, err := d.open(ctx, c)
	if err != nil {
		return nil, err
	}
	t := target[P, C]{x}
	if conn, ok := any(x).(ConnectorOf[P]); ok {
		return connectTarget[P, C]{t, conn}, nil
	}
	return t, nil
}

// newOptions returns nil for NoOptions, as for a driver without an
// optioner, so the loader reports any key as unknown in the same words.
func newOptions[O any]() any {
	if _, none := any((*O)(nil)).(*NoOptions); none {
		return nil
	}
	return new(O)
}

func check[V any](v *V) error {
	if v == nil {
		return fmt.Errorf("no %T", v)
	}
	if c, ok := any(v).(Checker); ok {
		return c.Check()
	}
	return nil
}

// take moves a workload's options out of its spec, typed, so the driver
// reads them from one place; a workload without options gets zero ones.
func take[O any](opts *any, what, workload string) (*O, error) {
	v := *opts
	*opts = nil
	switch o := v.(type) {
	case nil:
		return new(O), nil
	case *O:
		if o == nil {
			return new(O), nil
		}
		return o, nil
	}
	return nil, fmt.Errorf("workload %s: %s options are %T, want %T", workload, what, v, (*O)(nil))
}

// target adapts a TargetOf to Target. The driver's optional abilities
// (LagReader, Describer...) stay on the wrapped value: reach them with As.
type target[P, C any] struct{ t TargetOf[P, C] }

func (w target[P, C]) NewProducer(ctx context.Context, spec ProducerSpec) (Producer, error) {
	o, err := take[P](&spec.Options, "produce", spec.Workload)
	if err != nil {
		return nil, err
	}
	return w.t.NewProducer(ctx, spec, o)
}

func (w target[P, C]) NewConsumer(ctx context.Context, spec ConsumerSpec) (Consumer, error) {
	o, err := take[C](&spec.Options, "consume", spec.Workload)
	if err != nil {
		return nil, err
	}
	return w.t.NewConsumer(ctx, spec, o)
}

func (w target[P, C]) Close() error { return w.t.Close() }

func (w target[P, C]) unwrap() any { return w.t }

// connectTarget is a target whose driver holds idle connections.
type connectTarget[P, C any] struct {
	target[P, C]
	conn ConnectorOf[P]
}

func (w connectTarget[P, C]) Connect(ctx context.Context, spec ConnectSpec) (Connections, error) {
	o, err := take[P](&spec.Options, "connect", spec.Workload)
	if err != nil {
		return nil, err
	}
	return w.conn.Connect(ctx, spec, o)
}

// As returns t's optional ability I (LagReader, TopicCreator, Describer,
// Prober, Connector...) if it has it, looking through the adapter that
// Define puts around a driver's targets (and WithRouter around those).
func As[I any](t Target) (I, bool) {
	var v any = t
	for v != nil {
		if i, ok := v.(I); ok {
			return i, true
		}
		w, ok := v.(interface{ unwrap() any })
		if !ok {
			break
		}
		v = w.unwrap()
	}
	var zero I
	return zero, false
}
