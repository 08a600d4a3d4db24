package drivers

import (
	"context"
	"errors"
	"strings"
	"testing"
)

type fakeConfig struct{ Addr string }

func (c *fakeConfig) Check() error {
	if c.Addr == "" {
		return errors.New("fake: addr is empty")
	}
	return nil
}

type fakeProduce struct{ Acks string }

func (o *fakeProduce) Check() error {
	if o.Acks == "some" {
		return errors.New("fake: acks some")
	}
	return nil
}

// fakeTarget records the options it was given.
type fakeTarget struct {
	cfg     *fakeConfig
	produce *fakeProduce
	consume *NoOptions
}

func (t *fakeTarget) NewProducer(_ context.Context, _ ProducerSpec, o *fakeProduce) (Producer, error) {
	t.produce = o
	return nil, nil
}

func (t *fakeTarget) NewConsumer(_ context.Context, _ ConsumerSpec, o *NoOptions) (Consumer, error) {
	t.consume = o
	return nil, nil
}

func (t *fakeTarget) Close() error { return nil }

func (t *fakeTarget) Describe() string { return "fake " + t.cfg.Addr }

// fakeConnTarget also holds idle connections.
type fakeConnTarget struct{ fakeTarget }

func (t *fakeConnTarget) Connect(_ context.Context, _ ConnectSpec, o *fakeProduce) (Connections, error) {
	t.produce = o
	return nil, nil
}

func openFake(_ context.Context, c *fakeConfig) (*fakeTarget, error) {
	return &fakeTarget{cfg: c}, nil
}

func TestDefine(t *testing.T) {
	d := Define(openFake)
	if _, ok := d.NewTargetConfig().(*fakeConfig); !ok {
		t.Fatalf("NewTargetConfig() = %T", d.NewTargetConfig())
	}
	if o := d.(ProduceOptioner).NewProduceOptions(); o == nil {
		t.Fatal("NewProduceOptions() = nil")
	}
	// The loader decodes nothing into NoOptions, so keys there stay unknown.
	if o := d.(ConsumeOptioner).NewConsumeOptions(); o != nil {
		t.Fatalf("NewConsumeOptions() = %#v, want nil", o)
	}
	if d.(ConnectCapable).CanConnect() {
		t.Error("CanConnect() without a Connect method")
	}

	c := d.(ConfigChecker)
	for _, tc := range []struct {
		cfg  any
		want string
	}{
		{&fakeConfig{}, "addr is empty"},
		{&fakeProduce{Acks: "some"}, "acks some"},
		{&struct{}{}, "want *drivers.fakeConfig"},
		{(*fakeConfig)(nil), "no *drivers.fakeConfig"},
	} {
		if err := c.CheckConfig(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckConfig(%T) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	for _, good := range []any{&fakeConfig{Addr: "a"}, &fakeProduce{}, &NoOptions{}} {
		if err := c.CheckConfig(good); err != nil {
			t.Errorf("CheckConfig(%T) = %v", good, err)
		}
	}

	if _, err := d.Open(context.Background(), &fakeProduce{}); err == nil {
		t.Error("Open with produce options as config succeeded")
	}
	tg, err := d.Open(context.Background(), &fakeConfig{Addr: "a"})
	if err != nil {
		t.Fatal(err)
	}
	ft, ok := As[*fakeTarget](tg)
	if !ok {
		t.Fatalf("As[*fakeTarget](%T) failed", tg)
	}
	if desc, ok := As[Describer](tg); !ok || desc.Describe() != "fake a" {
		t.Errorf("As[Describer] = %v, %v", desc, ok)
	}
	if _, ok := As[LagReader](tg); ok {
		t.Error("As[LagReader] found an ability the target lacks")
	}
	if _, ok := As[Connector](tg); ok {
		t.Error("As[Connector] found an ability the target lacks")
	}

	ctx := context.Background()
	opts := &fakeProduce{Acks: "all"}
	if _, err := tg.NewProducer(ctx, ProducerSpec{Workload: "w", Options: opts}); err != nil || ft.produce != opts {
		t.Errorf("NewProducer passed %v (%v), want the workload's options", ft.produce, err)
	}
	if _, err := tg.NewProducer(ctx, ProducerSpec{Workload: "w"}); err != nil || ft.produce == nil || *ft.produce != (fakeProduce{}) {
		t.Errorf("NewProducer without options passed %v (%v), want zero options", ft.produce, err)
	}
	if _, err := tg.NewConsumer(ctx, ConsumerSpec{Workload: "w"}); err != nil || ft.consume == nil {
		t.Errorf("NewConsumer passed %v (%v), want zero options", ft.consume, err)
	}
	_, err = tg.NewConsumer(ctx, ConsumerSpec{Workload: "w", Options: opts})
	if err == nil || !strings.Contains(err.Error(), "workload w: consume options are *drivers.fakeProduce") {
		t.Errorf("NewConsumer with produce options: %v", err)
	}
}

func TestDefineConnector(t *testing.T) {
	d := Define(func(_ context.Context, c *fakeConfig) (*fakeConnTarget, error) {
		return &fakeConnTarget{fakeTarget{cfg: c}}, nil
	})
	if !d.(ConnectCapable).CanConnect() {
		t.Fatal("CanConnect() = false for a target with Connect")
	}
	tg, err := d.Open(context.Background(), &fakeConfig{Addr: "a"})
	if err != nil {
		t.Fatal(err)
	}
	conn, ok := As[Connector](tg)
	if !ok {
		t.Fatalf("As[Connector](%T) failed", tg)
	}
	opts := &fakeProduce{Acks: "all"}
	if _, err := conn.Connect(context.Background(), ConnectSpec{Workload: "w", Options: opts}); err != nil {
		t.Fatal(err)
	}
	if ft, _ := As[*fakeConnTarget](tg); ft.produce != opts {
		t.Errorf("Connect passed %v, want the workload's options", ft.produce)
	}
	if _, ok := As[Describer](tg); !ok {
		t.Error("As[Describer] lost an ability of the wrapped target")
	}
}
