package steps_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/results"
)

// A step whose if: is false for the plan's variables is not refused for
// what it would do: a broker step on a real broker's URL loads when its
// if: rules it out for that URL, and is refused when the if: lets it run.
// Its own mistakes are still caught.
func TestIfFalseAtLoadIsNotRefused(t *testing.T) {
	head := `name: b
vars:
  url: tcp://127.0.0.1:1883
targets:
  mq: { driver: mqtt, url: "${url}" }
workloads:
  w: { produce: { topic: a } }
steps:
`
	cases := []struct{ name, steps, want string }{
		{"if false", "  - broker: restart\n    target: mq\n    if: vars.url == \"embedded\"\n", ""},
		{"if true", "  - broker: restart\n    target: mq\n    if: vars.url != \"embedded\"\n", `broker: target "mq" does not run an embedded broker`},
		{"if over figures", "  - broker: restart\n    target: mq\n    if: w.acked > 0\n", `broker: target "mq" does not run an embedded broker`},
		{"if false, own mistake", "  - broker: reboot\n    target: mq\n    if: vars.url == \"embedded\"\n", `"reboot" is not an action`},
		{"if false, unknown target", "  - broker: restart\n    target: mqq\n    if: vars.url == \"embedded\"\n", `unknown target "mqq"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := plan.Parse("plan.yaml", []byte(head+tc.steps), plan.Options{})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v\nwant %q", err, tc.want)
			}
		})
	}
}

// The broker-restart plan's real-broker mode (its header's command line)
// loads; its embedded mode too.
func TestBrokerRestartPlanRealBrokerMode(t *testing.T) {
	for _, url := range []string{"tcp://host:1883", ""} {
		env := func(k string) (string, bool) {
			if k == "MQTT_URL" && url != "" {
				return url, true
			}
			return "", false
		}
		_, _, err := plan.Load("../plans/mqtt-broker-restart.yaml", plan.Options{LookupEnv: env,
			Set: map[string]string{"stop_cmd": "systemctl stop mosquitto", "start_cmd": "systemctl start mosquitto"}})
		if err != nil {
			t.Errorf("MQTT_URL=%s: %v", url, err)
		}
	}
}

// An expression over probes.X where no earlier step keeps probe X is an
// error at load time, at the expression.
func TestProbeReadBeforeKept(t *testing.T) {
	cases := []struct{ name, steps, want string }{
		{"never kept", "  - assert: probes.count == 3\n", `plan.yaml:10:13: expression "probes.count == 3": no earlier step keeps probe "count"`},
		{"kept later", "  - sleep: 1ms\n    if: probes.done.exit == 0\n  - exec: [\"true\"]\n    as: done\n", `plan.yaml:11:9: expression "probes.done.exit == 0": no earlier step keeps probe "done"`},
		{"own", "  - exec: [\"true\"]\n    as: done\n    if: probes.done.exit == 0\n", `no earlier step keeps probe "done"`},
		{"index form", "  - exec: [\"true\"]\n    as: done\n  - assert: probes[\"dnoe\"].exit == 0\n", `no earlier step keeps probe "dnoe" (a probe step, or exec or shell with as: dnoe, before this one; they keep done)`},
		{"kept earlier", "  - exec: [\"true\"]\n    as: done\n  - assert: probes.done.exit == 0\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := plan.Parse("plan.yaml", []byte(planHead+tc.steps), plan.Options{})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v\nwant %q", err, tc.want)
			}
		})
	}
}

// A probe whose step was skipped by its if: is empty: JSON null, an empty
// report cell, and a later if: that tests for it runs.
func TestSkippedProbeIsEmpty(t *testing.T) {
	res, out := run(t, context.Background(), t.TempDir(), `  - exec: ["true"]
    as: done
    if: vars.greeting == "bye"
  - exec: ["true"]
    as: after
    if: probes.done != nil && probes.done.exit == 0
  - assert: probes.done == nil
report:
  tables:
    - title: skipped
      rows: runs
      columns:
        - { name: exit, value: probes.done.exit }
        - { name: greeting, value: vars.greeting }
`)
	if res.Status != results.Passed {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	data, _ := json.Marshal(res.Runs[0].Probes)
	if string(data) != `{"after":null,"done":null}` {
		t.Errorf("probes in JSON %s, want both null", data)
	}
	if got := res.Tables[0].Rows[0]; got[0] != "" || got[1] != "hello" {
		t.Errorf("report row %q, want an empty cell for the skipped probe", got)
	}
	if strings.Contains(out, "<nil>") {
		t.Errorf("output shows <nil>:\n%s", out)
	}
}
