package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/drivers/mqtt"
	"github.com/planrun/planrun/drivers/redis"
	"github.com/planrun/planrun/workloads"
)

// TestMQTTToRedisRelay runs the rule-engine stand-in end to end: a fleet of
// MQTT devices publishes, a relay consumes with a wildcard subscription and
// writes every message into a Redis hash, and HLEN counts them.
func TestMQTTToRedisRelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	mt, err := mqtt.Driver.Open(ctx, &mqtt.TargetConfig{URL: mqtt.Embedded})
	if err != nil {
		t.Fatal(err)
	}
	defer mt.Close()
	rt, err := redis.Driver.Open(ctx, &redis.TargetConfig{Addr: redis.Embedded})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	env := &workloads.Shared{Run: 7, Acct: workloads.NewAccounting(7),
		Fail: func(err error) { t.Errorf("fail: %v", err) }, Warn: func(s string) { t.Logf("warn: %s", s) }}

	const n = 1000
	qos := 1
	relay := workloads.NewRelay("rule", workloads.RelaySection{
		Spec: workloads.RelaySpec{Threads: 4, Count: n},
		From: workloads.RelayFrom{Topic: "devices/+/data"}, FromOpts: &mqtt.ConsumeOptions{QoS: &qos},
		To: workloads.RelayTo{Target: "redis", Topic: "telemetry"}, ToOpts: &redis.ProduceOptions{Command: "hset"},
	}, mt, "mqtt", rt, env)
	if err := relay.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer relay.Stop(context.Background())
	prod := workloads.NewProducer("devices", workloads.ProduceSpec{Topic: "devices/{client}/data", Threads: 4, Count: n, Size: 64},
		&mqtt.ProduceOptions{Clients: 20, ConnectRate: 500}, mt, "mqtt", 1, env)
	if err := prod.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer prod.Stop(context.Background())

	prober, ok := drivers.As[drivers.Prober](rt)
	if !ok {
		t.Fatal("redis targets cannot answer probes")
	}
	for {
		v, err := prober.Probe(ctx, []string{"HLEN", "telemetry"})
		if err != nil {
			t.Fatal(err)
		}
		if v == int64(n) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("HLEN telemetry = %v, want %d", v, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Redis holds every message before the relay has counted the last
	// acknowledgement: await the count.
	c := relay.Recorder().Counters()
	for c.Acked < n && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
		c = relay.Recorder().Counters()
	}
	if c.Failed != 0 || c.Received < n || c.Acked < n {
		t.Errorf("relay counters %+v", c)
	}
}
