// Package drivertest is the conformance suite every planrun driver passes.
// A driver's test package calls Run with the driver's registered name and
// a way to reach a broker; Run runs, as subtests, every check that follows
// from the capabilities the driver declares (drivers.Capabilities): plans
// run through the real engine and workloads, so counts, loss and
// duplicates are the product's own accounting by message identity.
//
//	func TestConformance(t *testing.T) {
//		drivertest.Run(t, drivertest.Suite{
//			Driver: "kafka",
//			Start: func(t testing.TB) drivertest.Env {
//				return drivertest.Env{Target: drivertest.Options{"brokers": "embedded"}, Broker: drivertest.EmbeddedBroker()}
//			},
//			Refused: drivertest.Options{"brokers": "127.0.0.1:1"},
//		})
//	}
//
// A driver registered without such a call fails CheckCovered, which the
// root package's tests run over every registered driver.
package drivertest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Options are a plan's keys for one section (a target, or a workload's
// produce or consume section), as a plan would write them: values are
// strings, numbers, booleans, lists or nested Options.
type Options map[string]any

// Suite says how to run the conformance checks for one driver (or one
// variant of it: a client library, a real broker).
type Suite struct {
	// Driver is the driver's registered name.
	Driver string
	// Start starts a broker for one check, or reaches one that runs, and
	// returns how a plan targets it. It is called once per check; what it
	// starts it stops with t.Cleanup. Start may call t.Skip (a real
	// broker not configured outside CI).
	Start func(t testing.TB) Env
	// Produce and Consume are keys every produce and consume section of
	// the suite's plans gets (qos: 1...).
	Produce, Consume Options
	// Refused are target keys that point at a loopback port where nothing
	// listens (such as "127.0.0.1:1"): opening must fail, promptly, with
	// an error that names the address. Nil skips the check, which the
	// suite reports.
	Refused Options
	// RefusedAddr is what the error for Refused must name (default:
	// 127.0.0.1:1).
	RefusedAddr string
	// Credentials starts (or reaches) a broker that demands credentials,
	// for drivers that declare Credentials: nil skips the check.
	Credentials func(t testing.TB) Credentials
	// Messages is how many messages the counting checks send (default
	// 2000).
	Messages int
	// Stored, when set, asks the broker itself how many messages topic
	// holds (a Redis HLEN, a Kafka group's lag that never committed...):
	// after the count check it must equal what the producer acked.
	Stored func(t testing.TB, env Env, topic string) int64
	// Positions, when set, are the consume keys that make a consumer keep
	// its position while stopped (mqtt: a persistent session), added to
	// Consume for the consumer-restart check only.
	Positions Options
}

// Env is a broker as a plan reaches it.
type Env struct {
	// Target are the target's keys besides driver.
	Target Options
	// Broker stops and starts the broker mid-run; nil when it cannot be
	// restarted here (the broker-restart check is then skipped, and says
	// so).
	Broker *Broker
}

// Broker stops and starts a broker from inside a plan: Stop and Start
// are one plan step each, in YAML flow style, naming the target as
// TargetName.
type Broker struct {
	Stop, Start string
	// Durable says that the broker keeps what it acknowledged across the
	// restart (a file-backed store): then nothing acknowledged may be
	// lost. Otherwise what it held when it stopped may be lost, and the
	// check only requires that loss be counted.
	Durable bool
	// pidfile is the process's pid file (ProcessBroker): the check holds
	// LockBroker on it.
	pidfile string
}

// TargetName is the name of the target in the suite's plans.
const TargetName = "t"

// EmbeddedBroker is a target's embedded broker, stopped and started with
// the broker step (the target implements drivers.BrokerController).
func EmbeddedBroker(durable bool) *Broker {
	return &Broker{
		Stop:    "{broker: stop, target: " + TargetName + "}",
		Start:   "{broker: start, target: " + TargetName + "}",
		Durable: durable,
	}
}

// ProcessBroker is an outside broker process: stopped with the kill step
// (SIGKILL to the process in pidfile) and started with the shell step
// running start, which must return once the broker listens.
func ProcessBroker(pidfile, start string, durable bool) *Broker {
	return &Broker{
		Stop:    "{kill: {pidfile: " + quote(pidfile) + ", signal: KILL}}",
		Start:   "{shell: " + quote(start) + "}",
		Durable: durable,
		pidfile: pidfile,
	}
}

// Credentials are two ways to reach a broker that authenticates.
type Credentials struct {
	// Good are target keys with valid credentials; Bad the same with a
	// wrong password; Secret is the wrong password, which no error or
	// output may show.
	Good, Bad Options
	Secret    string
}

// flow writes o as a YAML flow mapping, keys sorted.
func (o Options) flow() string {
	return "{" + strings.Join(o.entries(), ", ") + "}"
}

// entries are o's "key: value" pairs, keys sorted.
func (o Options) entries() []string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + ": " + value(o[k])
	}
	return out
}

// With returns a copy of o with the keys of more added (more wins).
func (o Options) With(more ...Options) Options { return o.merge(more...) }

// merge returns o with the keys of more added (more wins).
func (o Options) merge(more ...Options) Options {
	out := Options{}
	for k, v := range o {
		out[k] = v
	}
	for _, m := range more {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func value(v any) string {
	switch x := v.(type) {
	case Options:
		return x.flow()
	case map[string]any:
		return Options(x).flow()
	case time.Duration:
		return x.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("drivertest: option value %v: %v", v, err))
	}
	return string(b)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
