package steps_test

import (
	"strings"
	"testing"

	_ "github.com/planrun/planrun/drivers/mqtt"
	"github.com/planrun/planrun/engine/enginetest"
	"github.com/planrun/planrun/plan"
)

func TestBrokerLoadErrors(t *testing.T) {
	head := "name: b\ntargets:\n  mem: { driver: memory }\n  mq: { driver: mqtt, url: embedded }\nworkloads:\n  w: { target: mem, produce: { topic: a } }\nsteps:\n"
	cases := []struct{ name, steps, want string }{
		{"not embedded", "  - broker: stop\n    target: mem\n", `9:13: broker: target "mem" does not run an embedded broker`},
		{"unknown target", "  - broker: stop\n    target: mqq\n", `9:13: broker: unknown target "mqq" (did you mean "mq"?)`},
		{"unknown action", "  - broker: reboot\n    target: mq\n", `8:13: broker: "reboot" is not an action; use stop, start, restart`},
		{"down without restart", "  - broker: stop\n    target: mq\n    down: 1s\n", "10:11: broker: down is for restart only"},
		{"no target", "  - broker: stop\n", `"target"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := plan.Parse("plan.yaml", []byte(head+tc.steps), plan.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant %q", err, tc.want)
			}
		})
	}
}

// A restart of the embedded MQTT broker: every client of the fleet drops
// and comes back; the events, the outage and the progress lines say so.
func TestBrokerRestartEvents(t *testing.T) {
	for _, client := range []string{"paho", "lean"} {
		t.Run(client, func(t *testing.T) { brokerRestart(t, client) })
	}
}

func brokerRestart(t *testing.T, client string) {
	y := `name: restart
targets:
  mq: { driver: mqtt, url: embedded, reconnect_interval: 500ms, client: ` + client + ` }
workloads:
  devices: { produce: { topic: t, clients: 5, interval: 50ms, qos: 1, connect_first: true } }
progress: 0s
steps:
  - start: devices
    phase: before
  - wait: devices.gauges.connected >= 5
    timeout: 30s
  - sleep: 1s
  - broker: restart
    target: mq
    down: 2s
    phase: outage
  - wait: devices.gauges.connected >= 5 && devices.events.reconnects >= 5
    timeout: 30s
  - phase: after
  - sleep: 1s
  - stop: all
`
	res, out := enginetest.ExecuteOutput(t, y)
	m := res.Runs[0].Metrics
	if len(m.Outages) != 1 {
		t.Fatalf("outages: %+v", m.Outages)
	}
	o := m.Outages[0]
	if !o.Ended || o.Clients != 5 || o.Of != 5 || o.Reconnects != 5 || o.Phase != "outage" {
		t.Errorf("outage: %+v", o)
	}
	// Down for 2 s; the clients retry every 500 ms at most.
	if d := o.Duration(); d < 2 || d > 3.5 {
		t.Errorf("outage lasted %.2f s, want 2 to 3.5", d)
	}
	counts := map[string]int64{}
	for _, ev := range m.Events {
		if ev.Workload == "devices" {
			counts[ev.Event] += ev.Count
		}
	}
	if counts["disconnected"] != 5 || counts["reconnected"] != 5 {
		t.Errorf("event counts %v, want 5 disconnected and 5 reconnected", counts)
	}
	var ph = map[string]float64{}
	for _, p := range m.Phases {
		ph[p.Name] = p.Workloads["devices"].Outage.Seconds
	}
	if ph["before"] != 0 || ph["after"] != 0 || ph["outage"] < 2 {
		t.Errorf("outage seconds per phase: %v", ph)
	}
	for _, want := range []string{"devices: 5/5 clients disconnected (", "; reconnected 5 by "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
