package main

import (
	"bytes"
	"github.com/planrun/planrun/engine/enginetest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/planrun/planrun/internal/testenv"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

func writePlan(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const memPlan = `name: cli
vars:
  want: "10"
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, count: 10 } }
progress: 0s
steps:
  - start: producer
  - wait: "!producer.running"
    timeout: 10s
  - assert: producer.acked == vars.want
`

func TestExitCodes(t *testing.T) {
	good := writePlan(t, memPlan)
	bad := writePlan(t, strings.Replace(memPlan, "- start: producer", "- strat: producer", 1))
	unreachable := writePlan(t, strings.Replace(strings.Replace(memPlan, "driver: memory", "driver: kafka, brokers: \"127.0.0.1:1\", dial_timeout: 200ms", 1), "  - assert", "  - sleep: 1s\n  - assert", 1))
	out := t.TempDir()
	cases := []struct {
		name string
		args []string
		code int
		in   string // expected in stdout+stderr
	}{
		{"version", []string{"version"}, 0, "planrun "},
		{"validate ok", []string{"validate", good}, 0, "ok"},
		{"validate bad", []string{"validate", good, bad}, 2, "plan.yaml:10:5: unknown step \"strat\" (did you mean \"start\"?)"},
		{"run passes", []string{"--out", out, good}, 0, "| produce"},
		{"flags before plan", []string{"--set", "want=11", "--out", out, "run", good}, 1, "assert `producer.acked == vars.want`: **FAILED**"},
		{"flags after plan", []string{good, "--set=want=11", "-q", "--out", out}, 1, "FAILED"},
		{"bad plan exits 2", []string{bad}, 2, "unknown step"},
		{"unknown var", []string{"--set", "wnat=1", good}, 2, `the plan has no variable "wnat"`},
		{"unknown flag", []string{"--bogus", good}, 2, "unknown flag --bogus"},
		{"no plan", []string{"run"}, 2, "run takes one plan file"},
		{"missing file", []string{"/nonexistent/plan.yaml"}, 2, "cannot read plan"},
		{"broker unreachable", []string{"--out", out, "-q", unreachable}, 3, "127.0.0.1:1"},
		{"connect timeout", []string{"--out", out, "-q", "--connect-timeout", "1ms", unreachable}, 3, "127.0.0.1:1"},
		{"explain lists", []string{"explain"}, 0, "driver     amqp, kafka"},
		{"explain a step", []string{"explain", "step", "wait"}, 0, "on_timeout"},
		{"explain unknown", []string{"explain", "kafak"}, 2, `nothing called "kafak" (did you mean "kafka"?)`},
		{"bad stop timeout", []string{"--stop-timeout", "30", good}, 2, `--stop-timeout "30": give a duration such as 30s`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(c.args, &stdout, &stderr)
			all := stdout.String() + stderr.String()
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s", code, c.code, all)
			}
			if !strings.Contains(all, c.in) {
				t.Errorf("output lacks %q:\n%s", c.in, all)
			}
			if strings.Contains(all, "goroutine ") || strings.Contains(all, "panic") {
				t.Errorf("stack trace in output:\n%s", all)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(out, "cli.json")); err != nil {
		t.Errorf("JSON result not written: %v", err)
	}
}

// Every example plan in plans/ validates, and every plan field the loader
// knows appears in the README's reference.
func TestPlansValidate(t *testing.T) {
	files, _ := filepath.Glob("plans/*.yaml")
	if len(files) == 0 {
		t.Fatal("no plans")
	}
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"validate"}, files...), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
}

func TestReadmeExamplesValidate(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	// Blocks fenced as ```yaml that start with "name:" are whole plans.
	re := regexp.MustCompile("(?s)```yaml\n(name:.*?)```")
	blocks := re.FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("README has no plan examples")
	}
	for i, b := range blocks {
		p := writePlan(t, b[1])
		var stdout, stderr bytes.Buffer
		if code := run([]string{"validate", p}, &stdout, &stderr); code != 0 {
			t.Errorf("README example %d does not validate:\n%s\n%s", i+1, stderr.String(), b[1])
		}
	}
}

// The quickstart end to end on embedded Kafka, scaled down: produce and
// consume, stop the consumer, build a backlog, read it back, drain.
func TestQuickstartEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"--set", "backlog=3MB", "--set", "warm=2s", "--set", "rate=3000", "--out", out, "-q", "plans/quickstart.yaml"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	report := stdout.String()
	for _, phase := range []string{"| warm ", "| backlog ", "| cold-read ", "| drain "} {
		if !strings.Contains(report, phase) {
			t.Errorf("report lacks a row for phase %q:\n%s", phase, report)
		}
	}
	res, err := results.Load(filepath.Join(out, "quickstart.json"))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckResult(t, res)
	m := res.Runs[0].Metrics
	var backlog metrics.Phase
	for _, ph := range m.Phases {
		if ph.Name == "backlog" {
			backlog = ph
		}
	}
	c := backlog.Workloads["consumer"]
	if c.Backlog.Bytes < 3e6 || c.Received > 500 {
		t.Errorf("backlog phase: backlog %d bytes, received %d", c.Backlog.Bytes, c.Received)
	}
	if c.Lag <= 0 {
		t.Errorf("the broker's lag was not read during the backlog phase: %d", c.Lag)
	}
	final := m.Workloads["consumer"]
	if final.Received != m.Workloads["producer"].Acked || final.Lost != 0 {
		t.Errorf("received %d of %d acked, lost %d", final.Received, m.Workloads["producer"].Acked, final.Lost)
	}
}

// The seed plans, scaled down, against the real brokers from Debian.
func TestSeedPlansOnRealBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"artemis round trip on ActiveMQ", map[string]string{"MQTT_URL": testenv.Broker(t, "PLANRUN_TEST_ACTIVEMQ")},
			[]string{"--set", "n=2000", "--set", "size=11B,1KB", "plans/artemis-roundtrip.yaml"},
			[]string{"| 2000 | 11B  | queue |", "| 2000 | 1KB  | pool  |"}},
		{"emqx-redis on mosquitto and redis-server", map[string]string{"MQTT_URL": testenv.Broker(t, "PLANRUN_TEST_MOSQUITTO"), "REDIS_ADDR": testenv.Broker(t, "PLANRUN_TEST_REDIS")},
			[]string{"--set", "clients=300", "--set", "duration=3s", "--set", "threads=50", "--set", "redis_key=planrun_test_" + strings.ReplaceAll(t.Name(), "/", "_"), "plans/emqx-redis.yaml"},
			[]string{"Message counts"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"-q", "--out", t.TempDir()}, c.args...), &stdout, &stderr)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
			}
			for _, w := range c.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("report lacks %q:\n%s", w, stdout.String())
				}
			}
		})
	}
}

// A secret given to a plan never appears in output or report files, even
// when the run fails on the target that uses it.
func TestSecretsStayOutOfOutput(t *testing.T) {
	const secret = "s3cr3t-Passw0rd"
	t.Setenv("PLANRUN_TEST_SECRET", secret)
	p := writePlan(t, `name: secret
vars:
  password: ${env:PLANRUN_TEST_SECRET}
targets:
  cache: { driver: redis, addr: "127.0.0.1:1", password: "${password}", dial_timeout: 200ms }
  mq: { driver: memory }
workloads:
  producer: { target: mq, produce: { topic: a, count: 5 } }
progress: 0s
steps:
  - start: producer
  - probe: cache
    command: [PING]
    as: pong
`)
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"--out", out, p}, &stdout, &stderr)
	if code != exitRunFailure {
		t.Errorf("exit %d, want %d", code, exitRunFailure)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*"))
	texts := map[string]string{"output": stdout.String() + stderr.String()}
	for _, f := range files {
		data, _ := os.ReadFile(f)
		texts[f] = string(data)
	}
	for where, text := range texts {
		if strings.Contains(text, secret) {
			t.Errorf("the secret appears in %s", where)
		}
	}
	if !strings.Contains(texts[filepath.Join(out, "secret.json")], `"password": "[redacted]"`) {
		t.Errorf("the JSON result does not show the variable as redacted")
	}
	if !strings.Contains(texts[filepath.Join(out, "secret.html")], `"password":"[redacted]"`) {
		t.Errorf("the HTML report does not show the variable as redacted")
	}
}
