package steps_test

import (
	"strings"
	"testing"

	_ "github.com/planrun/planrun/drivers/memory"
	_ "github.com/planrun/planrun/drivers/mqtt"
	"github.com/planrun/planrun/plan"
)

func TestNetworkLoadErrors(t *testing.T) {
	head := "name: n\ntargets:\n  mem: { driver: memory }\n  mq: { driver: mqtt, url: embedded, proxy: true }\n  plain: { driver: mqtt, url: embedded }\nworkloads:\n  w: { target: mq, produce: { topic: a } }\nsteps:\n"
	cases := []struct{ name, steps, want string }{
		{"memory has no network", "  - network: { target: mem, latency: 200ms }\n", `9:24: network: target "mem" (driver memory) has no network link to degrade; network faults work with the drivers `},
		{"no proxy", "  - network: { target: plain, cut: true }\n", `9:24: network: target "plain" is not reached through a proxy; add proxy: true to targets.plain`},
		{"unknown target", "  - network: { target: mqq, cut: true }\n", `9:24: network: unknown target "mqq" (did you mean "mq"?)`},
		{"nothing to do", "  - network: { target: mq, for: 1s }\n", `9:14: network: say what to do to the link`},
		{"two things", "  - network: { target: mq, latency: 1s, cut: true }\n", `9:14: network: give one of latency/jitter/bandwidth, reset, cut or restore`},
		{"jitter above latency", "  - network: { target: mq, latency: 10ms, jitter: 20ms }\n", `9:37: network: jitter 20ms is larger than latency 10ms`},
		{"jitter alone", "  - network: { target: mq, jitter: 20ms }\n", `network: jitter varies a latency: give latency too`},
		{"sub-millisecond", "  - network: { target: mq, latency: 1500us }\n", `network: latency 1.5ms, jitter 0s: the proxy delays in whole milliseconds`},
		{"bandwidth unit", "  - network: { target: mq, bandwidth: 1MB }\n", "plan.yaml:9:39: bandwidth \"1MB\" needs a rate unit: a size per second such as 1MB/s (10^6 bytes/s) or 250kB/s, or bits such as 10Mbit/s"},
		{"bandwidth step", "  - network: { target: mq, bandwidth: 1500B/s }\n", `the proxy limits in whole kB/s`},
		{"restore for", "  - network: { target: mq, restore: true, for: 1s }\n", `9:48: network: restore ends the fault in place at once`},
		{"unknown key", "  - network: { target: mq, delay: 1s }\n", `unknown key "delay" in step 1 (network): network; known: target, latency, jitter, bandwidth, reset, cut, for, restore`},
		{"no target", "  - network: { cut: true }\n", `needs "target"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := plan.Parse("plan.yaml", []byte(head+tc.steps), plan.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant %q", err, tc.want)
			} else if strings.Count(err.Error(), "plan.yaml:") != 1 {
				t.Errorf("one mistake, several errors:\n%v", err)
			}
		})
	}
	_, _, err := plan.Parse("plan.yaml", []byte(strings.Replace(head, "steps:", "workers: [127.0.0.1:7070]\nsteps:", 1)+"  - network: { target: mq, cut: true }\n"), plan.Options{})
	if want := "10:24: network: network faults act on the proxy in the process that runs the workloads; a run over workers cannot use them"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a plan on workers: error %v\nwant %q", err, want)
	}
	_, _, err = plan.Parse("plan.yaml", []byte(head+"  - network: { target: mq, latency: 200ms, jitter: 20ms, for: 30s }\n  - network: { target: mq, bandwidth: 1MB/s }\n  - network: { target: mq, restore: true }\n"), plan.Options{})
	if err != nil {
		t.Errorf("a valid plan: %v", err)
	}
}

func TestProxyLoadErrors(t *testing.T) {
	for _, tc := range []struct{ name, target, want string }{
		{"memory", "{ driver: memory, proxy: true }", `3:32: target "mq": proxy: the memory driver has no network connections to put a proxy in front of; remove proxy:`},
		{"bad jitter", "{ driver: mqtt, url: embedded, proxy: { jitter: 5ms } }", `3:45: proxy: jitter varies a latency: give latency too`},
		{"unknown key", "{ driver: mqtt, url: embedded, proxy: { loss: 1 } }", `unknown key "loss" in proxy; known: latency, jitter, bandwidth`},
		{"not a bool", "{ driver: mqtt, url: embedded, proxy: maybe }", `proxy: want true or false, got "maybe"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := "name: p\ntargets:\n  mq: " + tc.target + "\nworkloads:\n  w: { produce: { topic: a } }\nsteps:\n  - start: w\n"
			_, _, err := plan.Parse("plan.yaml", []byte(y), plan.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant %q", err, tc.want)
			}
		})
	}
}
