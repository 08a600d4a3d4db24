package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/planrun/planrun/internal/testenv"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

// These tests run plans against the rabbitmq-server node of
// .ci/services.sh (PLANRUN_TEST_RABBITMQ) and check planrun's counts
// against the broker's own: rabbitmqctl list_queues and the management
// API's message_stats.

type rabbitEnv struct{ url, mgmt, node string }

func rabbit(t *testing.T) rabbitEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end run against rabbitmq-server")
	}
	return rabbitEnv{testenv.Broker(t, "PLANRUN_TEST_RABBITMQ"), testenv.Broker(t, "PLANRUN_TEST_RABBITMQ_MGMT"), testenv.Broker(t, "PLANRUN_TEST_RABBITMQ_NODE")}
}

// uniq names queues and exchanges no earlier run used.
func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
}

// queueDepths parses rabbitmqctl list_queues name messages ... output (a
// probe's stdout) into name -> columns.
func queueDepths(t *testing.T, r results.Run, probe string) map[string][]int64 {
	t.Helper()
	p, ok := r.Probes[probe].(map[string]any)
	if !ok {
		t.Fatalf("probe %s: %#v", probe, r.Probes[probe])
	}
	out := map[string][]int64{}
	for _, line := range strings.Split(fmt.Sprint(p["stdout"]), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		var nums []int64
		for _, s := range f[1:] {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				nums = nil
				break
			}
			nums = append(nums, n)
		}
		if nums != nil {
			out[f[0]] = nums
		}
	}
	return out
}

// mgmtQueue is what the management API says of a queue.
type mgmtQueue struct {
	Messages        int64 `json:"messages"`
	MessagesReady   int64 `json:"messages_ready"`
	MessagesUnacked int64 `json:"messages_unacknowledged"`
	Stats           struct {
		Publish    int64 `json:"publish"`
		DeliverGet int64 `json:"deliver_get"`
		Ack        int64 `json:"ack"`
		Redeliver  int64 `json:"redeliver"`
	} `json:"message_stats"`
}

func (e rabbitEnv) queue(t *testing.T, name string) mgmtQueue {
	t.Helper()
	req, _ := http.NewRequest("GET", e.mgmt+"/api/queues/%2F/"+url.PathEscape(name), nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("management API: %v", err)
	}
	defer resp.Body.Close()
	var q mgmtQueue
	if err := json.NewDecoder(resp.Body).Decode(&q); err != nil {
		t.Fatalf("management API: queue %s: %v", name, err)
	}
	return q
}

// awaitQueue polls the management API (its statistics are refreshed every
// second) until cond holds for the queue, or fails after 20 s.
func (e rabbitEnv) awaitQueue(t *testing.T, name string, what string, cond func(mgmtQueue) bool) mgmtQueue {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		q := e.queue(t, name)
		if cond(q) {
			return q
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s: the management API says %+v; want %s", name, q, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Messages to queues on the default exchange, classic and quorum, several
// consumers with manual acks and one with automatic acks: every message
// acked by a confirm is received once, and the broker counted as many
// publishes, deliveries and acks.
func TestRabbitMQCounts(t *testing.T) {
	env := rabbit(t)
	classic, quorum := uniq("planrun-classic"), uniq("planrun-quorum")
	plan := `name: rabbitmq-counts
targets:
  rmq:
    driver: rabbitmq
    url: "` + env.url + `"
    queues:
      ` + classic + `: { type: classic }
      ` + quorum + `: { type: quorum }
workloads:
  p1: { produce: { topic: ` + classic + `, count: 3000, threads: 32, size: 256B, persistent: true } }
  p2: { produce: { topic: ` + quorum + `, count: 2000, threads: 8, size: 100B } }
  c1: { consume: { topic: ` + classic + `, consumers: 3, prefetch: 20 } }
  c2: { consume: { topic: ` + quorum + `, auto_ack: true } }
progress: 0s
steps:
  - start: [c1, c2]
  - start: [p1, p2]
  - wait: c1.received >= 3000 && c2.received >= 2000 && !p1.running && !p2.running
    timeout: 2m
  - stop: all
  - exec: [rabbitmqctl, -q, -n, ` + env.node + `, list_queues, name, messages, messages_ready, messages_unacknowledged]
    as: depth
`
	res, _, _ := runInline(t, plan)
	r := res.Runs[0]
	m := r.Metrics.Workloads
	for _, c := range []struct {
		p, c  string
		queue string
		n     int64
	}{{"p1", "c1", classic, 3000}, {"p2", "c2", quorum, 2000}} {
		p, s := m[c.p], m[c.c]
		if p.Acked != c.n || p.Failed != 0 || s.Received != c.n || s.Lost != 0 || s.Duplicates != 0 {
			t.Errorf("%s/%s: acked %d failed %d, received %d lost %d duplicates %d; want %d acked and received once", c.p, c.c, p.Acked, p.Failed, s.Received, s.Lost, s.Duplicates, c.n)
		}
		if d := queueDepths(t, r, "depth")[c.queue]; len(d) != 3 || d[1] != 0 {
			t.Errorf("rabbitmqctl list_queues %s: %v, want no message ready", c.queue, d)
		}
		// A quorum queue settles automatic acks a moment later: await it.
		q := env.awaitQueue(t, c.queue, fmt.Sprintf("empty, publish = deliver_get = %d", c.n), func(q mgmtQueue) bool {
			return q.Messages == 0 && q.Stats.Publish == c.n && q.Stats.DeliverGet == c.n
		})
		t.Logf("%s: broker counted publish %d, deliver_get %d, ack %d; planrun acked %d, received %d", c.queue, q.Stats.Publish, q.Stats.DeliverGet, q.Stats.Ack, p.Acked, s.Received)
	}
}

// Exchanges route by their type, and planrun's accounting expects at each
// queue what the broker put there: the producers run first, rabbitmqctl
// counts each queue, then the consumers read them empty.
func TestRabbitMQRouting(t *testing.T) {
	env := rabbit(t)
	s := uniq("rt")
	q := func(n string) string { return s + "-" + n }
	plan := `name: rabbitmq-routing
targets:
  rmq:
    driver: rabbitmq
    url: "` + env.url + `"
    exchanges:
      ` + q("direct") + `: { type: direct }
      ` + q("fanout") + `: { type: fanout }
      ` + q("topic") + `: { type: topic, durable: false }
    queues:
      ` + q("red") + `: { bindings: [{ exchange: ` + q("direct") + `, key: red }] }
      ` + q("blue-eu") + `: { bindings: [{ exchange: ` + q("direct") + `, key: blue }, { exchange: ` + q("topic") + `, key: "eu.#" }] }
      ` + q("fan1") + `: { bindings: [{ exchange: ` + q("fanout") + ` }] }
      ` + q("fan2") + `: { bindings: [{ exchange: ` + q("fanout") + `, key: ignored }] }
      ` + q("orders") + `: { bindings: [{ exchange: ` + q("topic") + `, key: "*.orders" }] }
      ` + q("all") + `: { bindings: [{ exchange: ` + q("topic") + `, key: "#" }, { exchange: amq.topic, key: "` + s + `.*" }] }
workloads:
  red: { produce: { topic: red, exchange: ` + q("direct") + `, count: 300, threads: 8 } }
  blue: { produce: { topic: x, exchange: ` + q("direct") + `, routing_key: blue, count: 200, threads: 8 } }
  green: { produce: { topic: green, exchange: ` + q("direct") + `, count: 50, mandatory: true } }
  fan: { produce: { topic: any, exchange: ` + q("fanout") + `, count: 250, threads: 8 } }
  euorders: { produce: { topic: eu.orders, exchange: ` + q("topic") + `, count: 150, threads: 4 } }
  usorders: { produce: { topic: us.orders, exchange: ` + q("topic") + `, count: 100, threads: 4 } }
  eustock: { produce: { topic: eu.de.stock, exchange: ` + q("topic") + `, count: 80, threads: 4 } }
  builtin: { produce: { topic: ` + s + `.x, exchange: amq.topic, count: 70, threads: 4 } }
  cred: { consume: { topic: ` + q("red") + ` } }
  cblueeu: { consume: { topic: ` + q("blue-eu") + ` } }
  cfan1: { consume: { topic: ` + q("fan1") + ` } }
  cfan2: { consume: { topic: ` + q("fan2") + ` } }
  corders: { consume: { topic: ` + q("orders") + ` } }
  call: { consume: { topic: ` + q("all") + ` } }
progress: 0s
steps:
  - start: [red, blue, green, fan, euorders, usorders, eustock, builtin]
  - wait: "!red.running && !blue.running && !green.running && !fan.running && !euorders.running && !usorders.running && !eustock.running && !builtin.running"
    timeout: 1m
  - exec: [rabbitmqctl, -q, -n, ` + env.node + `, list_queues, name, messages]
    as: depth
  - start: [cred, cblueeu, cfan1, cfan2, corders, call]
  - wait: cred.backlog.messages == 0 && cblueeu.backlog.messages == 0 && cfan1.backlog.messages == 0 && cfan2.backlog.messages == 0 && corders.backlog.messages == 0 && call.backlog.messages == 0
    timeout: 1m
  - stop: all
`
	res, _, _ := runInline(t, plan)
	r := res.Runs[0]
	m := r.Metrics.Workloads
	if g := m["green"]; g.Acked != 0 || g.Failed != 50 || g.Gauges["returned"] != 50 {
		t.Errorf("green (no queue bound, mandatory): acked %d failed %d returned %v; want every send returned and failed", g.Acked, g.Failed, g.Gauges["returned"])
	}
	want := map[string]int64{"red": 300, "blue-eu": 200 + 150 + 80, "fan1": 250, "fan2": 250, "orders": 150 + 100, "all": 150 + 100 + 80 + 70}
	depth := queueDepths(t, r, "depth")
	for name, n := range want {
		c := m["c"+strings.ReplaceAll(name, "-", "")]
		expected := c.Received - c.Duplicates + c.Lost
		if broker := depth[q(name)]; len(broker) != 1 || broker[0] != n || expected != n || c.Lost != 0 || c.Duplicates != 0 {
			t.Errorf("queue %s: the broker held %v, planrun expected %d and received %d (lost %d, duplicates %d); want %d", name, broker, expected, c.Received, c.Lost, c.Duplicates, n)
		}
	}
}

// A consumer stopped and started again resumes: the queue kept what was
// published meanwhile, and nothing is lost or received twice.
func TestRabbitMQConsumerRestart(t *testing.T) {
	env := rabbit(t)
	queue := uniq("planrun-resume")
	plan := `name: rabbitmq-resume
targets:
  rmq: { driver: rabbitmq, url: "` + env.url + `", queues: { ` + queue + `: { type: quorum } } }
workloads:
  p: { produce: { topic: ` + queue + `, rate: 400, count: 2000, threads: 16 } }
  c: { consume: { topic: ` + queue + `, lag_interval: 200ms } }
progress: 0s
steps:
  - start: [c, p]
  - wait: c.received >= 300
    timeout: 30s
  - stop: c
    phase: stopped
  - wait: c.lag >= 300
    timeout: 30s
  - start: c
    phase: resumed
  - wait: "!p.running && c.backlog.messages == 0"
    timeout: 1m
  - stop: all
`
	res, _, _ := runInline(t, plan)
	m := res.Runs[0].Metrics
	p, c := m.Workloads["p"], m.Workloads["c"]
	if p.Acked != 2000 || c.Received != 2000 || c.Lost != 0 || c.Duplicates != 0 {
		t.Errorf("acked %d, received %d, lost %d, duplicates %d; want 2000 received once", p.Acked, c.Received, c.Lost, c.Duplicates)
	}
	var resumed int64
	for _, ph := range m.Phases {
		if ph.Name == "resumed" {
			resumed = ph.Workloads["c"].Received
		}
	}
	if resumed < 300 {
		t.Errorf("the resumed consumer received %d, want the 300 or more the queue kept while it was stopped", resumed)
	}
	env.awaitQueue(t, queue, "empty, 2000 published", func(q mgmtQueue) bool { return q.Messages == 0 && q.Stats.Publish == 2000 })
}

// The test node is stopped (rabbitmqctl stop_app: every connection is
// closed and the port refuses) and started again mid-run: producer and
// consumer report the disconnect, the outage and the reconnect, and with a
// quorum queue and persistent messages nothing the broker confirmed is
// lost.
func TestRabbitMQBrokerRestart(t *testing.T) {
	env := rabbit(t)
	queue := uniq("planrun-restart")
	plan := `name: rabbitmq-restart
targets:
  rmq: { driver: rabbitmq, url: "` + env.url + `", reconnect_interval: 500ms, queues: { ` + queue + `: { type: quorum } } }
workloads:
  p: { produce: { topic: ` + queue + `, rate: 300, threads: 64, persistent: true, send_timeout: 1m } }
  c: { consume: { topic: ` + queue + ` } }
progress: 0s
steps:
  - start: [c, p]
    phase: before
  - wait: c.received >= 300
    timeout: 30s
  - exec: [rabbitmqctl, -q, -n, ` + env.node + `, stop_app]
    phase: down
  - sleep: 2s
  - exec: [rabbitmqctl, -q, -n, ` + env.node + `, start_app]
    phase: back
  - wait: p.events.reconnects >= 1 && c.events.reconnects >= 1
    timeout: 1m
  - sleep: 2s
  - stop: p
  - wait: c.backlog.messages == 0
    timeout: 30s
  - stop: all
  - exec: [rabbitmqctl, -q, -n, ` + env.node + `, list_queues, name, messages]
    as: depth
`
	res, _, _ := runInline(t, plan)
	r := res.Runs[0]
	m := r.Metrics
	for _, w := range []string{"p", "c"} {
		ev := eventCounts(m, w)
		if ev[metrics.EventDisconnected] != 1 || ev[metrics.EventReconnected] != 1 {
			t.Errorf("%s events %v, want one disconnect and one reconnect", w, ev)
		}
		o := outageOf(t, m, w)
		if !o.Ended || o.Duration() < 1 || o.Duration() > 30 {
			t.Errorf("%s outage %+v (%.1f s), want one that ended after the 2 s the broker was away", w, o, o.Duration())
		}
		t.Logf("%s outage %.2f s, reason %q", w, o.Duration(), o.Reason)
	}
	p, c := m.Workloads["p"], m.Workloads["c"]
	if c.Lost != 0 || c.Received-c.Duplicates < p.Acked {
		t.Errorf("acked %d, received %d (%d duplicates), lost %d: a confirmed message was lost", p.Acked, c.Received, c.Duplicates, c.Lost)
	}
	t.Logf("acked %d, failed %d, received %d, duplicates %d, redelivered %v", p.Acked, p.Failed, c.Received, c.Duplicates, c.Gauges["redelivered"])
	if d := queueDepths(t, r, "depth")[queue]; len(d) != 1 || d[0] != 0 {
		t.Errorf("rabbitmqctl list_queues %s: %v, want an empty queue", queue, d)
	}
}

// Opening fails with a clear error naming the broker, never the password.
func TestRabbitMQOpenErrors(t *testing.T) {
	env := rabbit(t)
	u, _ := url.Parse(env.url)
	bad := *u
	bad.User = url.UserPassword("guest", "not-the-password")
	cases := []struct {
		name, url string
		want      []string
	}{
		{"refused", "amqp://guest:s3cret-pw@127.0.0.1:1/", []string{"rabbitmq: connect to 127.0.0.1:1 vhost /", "connection refused"}},
		{"credentials", bad.String(), []string{"the broker refused user \"guest\": wrong user name or password"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := writePlan(t, `name: open
targets:
  rmq: { driver: rabbitmq, url: "`+c.url+`", connect_timeout: 5s }
workloads:
  p: { produce: { topic: q, count: 1 } }
progress: 0s
steps:
  - start: p
`)
			var stdout, stderr bytes.Buffer
			code := run([]string{"-q", "--out", t.TempDir(), plan}, &stdout, &stderr)
			all := stdout.String() + stderr.String()
			if code != 3 {
				t.Errorf("exit %d, want 3\n%s", code, all)
			}
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q:\n%s", w, all)
				}
			}
			for _, secret := range []string{"s3cret-pw", "not-the-password"} {
				if strings.Contains(all, secret) {
					t.Errorf("output shows the password:\n%s", all)
				}
			}
		})
	}
}

// A malformed option is a load error at its place in the file.
func TestRabbitMQLoadErrors(t *testing.T) {
	base := `name: load
targets:
  rmq:
    driver: rabbitmq
    url: amqp://guest:guest@127.0.0.1:5672/
    queues:
      q: { type: TYPE }
workloads:
  p: { produce: { topic: q, PRODUCE } }
  c: { consume: { topic: q, CONSUME } }
steps:
  - start: p
`
	cases := []struct{ typ, produce, consume, want string }{
		{"quorom", "count: 1", "prefetch: 10", `plan.yaml:4:5: target "rmq": rabbitmq: queues.q.type "quorom": use classic, quorum or stream`},
		{"classic", "persistant: true", "prefetch: 10", `plan.yaml:9:29: unknown key "persistant" in workload "p" produce (did you mean "persistent"?)`},
		{"classic", "count: 1", "prefetch: lots", `plan.yaml:10:39: workload "c" consume: prefetch: want a whole number, got "lots"`},
		{"classic", "routing_key: k", "prefetch: 10", "routing_key is set without exchange"},
	}
	for _, c := range cases {
		plan := writePlan(t, strings.NewReplacer("TYPE", c.typ, "PRODUCE", c.produce, "CONSUME", c.consume).Replace(base))
		var stdout, stderr bytes.Buffer
		code := run([]string{"validate", plan}, &stdout, &stderr)
		all := stdout.String() + stderr.String()
		if code != 2 || !strings.Contains(all, c.want) {
			t.Errorf("exit %d, want 2 and %q:\n%s", code, c.want, all)
		}
	}
}

// AMQP 1.0 through RabbitMQ's rabbitmq_amqp1_0 plugin: the queue is
// declared by a rabbitmq target of the same plan (a durable classic queue:
// receivers of a quorum queue through RabbitMQ 3.10's plugin stall with
// messages left in the queue, see the README's amqp section) and reached
// as the address /amq/queue/NAME; unsettled sends are acked by the
// broker's accepted disposition. Counts equal the broker's own.
func TestAMQP10Counts(t *testing.T) {
	env := rabbit(t)
	amqpURL := testenv.Broker(t, "PLANRUN_TEST_AMQP")
	queue := uniq("planrun-amqp10")
	plan := `name: amqp10-counts
targets:
  rmq: { driver: rabbitmq, url: "` + env.url + `", queues: { ` + queue + `: { type: classic } } }
  a10: { driver: amqp, url: "` + amqpURL + `", username: guest, password: guest }
workloads:
  p: { target: a10, produce: { topic: /amq/queue/` + queue + `, count: 2000, threads: 16, size: 200B, durable: true } }
  s: { target: a10, produce: { topic: /amq/queue/` + queue + `, count: 500, threads: 1, size: 200B, settled: true } }
  c: { target: a10, consume: { topic: /amq/queue/` + queue + `, consumers: 2, credit: 50 } }
progress: 0s
steps:
  - start: c
  - start: [p, s]
  - wait: "!p.running && !s.running && c.received >= 2500"
    timeout: 2m
  - stop: all
  - exec: [rabbitmqctl, -q, -n, ` + env.node + `, list_queues, name, messages]
    as: depth
`
	res, _, _ := runInline(t, plan)
	r := res.Runs[0]
	m := r.Metrics.Workloads
	p, s, c := m["p"], m["s"], m["c"]
	if p.Acked != 2000 || p.Failed != 0 || s.Acked != 500 || c.Received != 2500 || c.Lost != 0 || c.Duplicates != 0 {
		t.Errorf("acked %d+%d (failed %d), received %d, lost %d, duplicates %d; want 2500 received once", p.Acked, s.Acked, p.Failed, c.Received, c.Lost, c.Duplicates)
	}
	if d := queueDepths(t, r, "depth")[queue]; len(d) != 1 || d[0] != 0 {
		t.Errorf("rabbitmqctl list_queues %s: %v, want an empty queue", queue, d)
	}
	q := env.awaitQueue(t, queue, "publish = deliver_get = 2500", func(q mgmtQueue) bool { return q.Stats.Publish == 2500 && q.Stats.DeliverGet == 2500 })
	t.Logf("broker: publish %d, deliver_get %d, ack %d", q.Stats.Publish, q.Stats.DeliverGet, q.Stats.Ack)
}

// The broker stopped and started under AMQP 1.0 links: events, an outage
// per workload, and nothing accepted by the broker is lost.
func TestAMQP10BrokerRestart(t *testing.T) {
	env := rabbit(t)
	amqpURL := testenv.Broker(t, "PLANRUN_TEST_AMQP")
	queue := uniq("planrun-amqp10-restart")
	plan := `name: amqp10-restart
targets:
  rmq: { driver: rabbitmq, url: "` + env.url + `", queues: { ` + queue + `: { type: classic } } }
  a10: { driver: amqp, url: "` + amqpURL + `", username: guest, password: guest, reconnect_interval: 500ms }
workloads:
  p: { target: a10, produce: { topic: /amq/queue/` + queue + `, rate: 200, threads: 32, durable: true, send_timeout: 1m } }
  c: { target: a10, consume: { topic: /amq/queue/` + queue + ` } }
progress: 0s
steps:
  - start: [c, p]
  - wait: c.received >= 200
    timeout: 30s
  - exec: [rabbitmqctl, -q, -n, ` + env.node + `, stop_app]
    phase: down
  - sleep: 2s
  - exec: [rabbitmqctl, -q, -n, ` + env.node + `, start_app]
    phase: back
  - wait: p.events.reconnects >= 1 && c.events.reconnects >= 1
    timeout: 1m
  - sleep: 2s
  - stop: p
  - wait: c.backlog.messages == 0
    timeout: 30s
  - stop: all
`
	res, _, _ := runInline(t, plan)
	m := res.Runs[0].Metrics
	for _, w := range []string{"p", "c"} {
		ev := eventCounts(m, w)
		if ev[metrics.EventDisconnected] != 1 || ev[metrics.EventReconnected] != 1 {
			t.Errorf("%s events %v, want one disconnect and one reconnect", w, ev)
		}
		if o := outageOf(t, m, w); !o.Ended {
			t.Errorf("%s outage %+v did not end", w, o)
		}
	}
	p, c := m.Workloads["p"], m.Workloads["c"]
	if c.Lost != 0 || c.Received-c.Duplicates < p.Acked {
		t.Errorf("acked %d, received %d (%d duplicates), lost %d: an accepted message was lost", p.Acked, c.Received, c.Duplicates, c.Lost)
	}
	t.Logf("acked %d, failed %d, received %d, duplicates %d", p.Acked, p.Failed, c.Received, c.Duplicates)
}

// Bad credentials and a closed port fail at open, clearly, without the
// password.
func TestAMQP10OpenErrors(t *testing.T) {
	amqpURL := testenv.Broker(t, "PLANRUN_TEST_AMQP")
	for _, c := range []struct{ name, target, want string }{
		{"refused", `url: "amqp://guest:s3cret-pw@127.0.0.1:1"`, "amqp: connect to 127.0.0.1:1: "},
		{"credentials", `url: "` + amqpURL + `", username: guest, password: s3cret-pw`, `the broker refused user "guest": wrong user name or password`},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := writePlan(t, `name: open
targets:
  a10: { driver: amqp, `+c.target+`, connect_timeout: 5s }
workloads:
  p: { produce: { topic: q, count: 1 } }
progress: 0s
steps:
  - start: p
`)
			var stdout, stderr bytes.Buffer
			code := run([]string{"-q", "--out", t.TempDir(), plan}, &stdout, &stderr)
			all := stdout.String() + stderr.String()
			if code != 3 || !strings.Contains(all, c.want) || strings.Contains(all, "s3cret-pw") {
				t.Errorf("exit %d, want 3 and %q without the password:\n%s", code, c.want, all)
			}
		})
	}
}

// The repository's RabbitMQ plans run end to end against rabbitmq-server:
// the cold read on a quorum queue, scaled down, and the Artemis round trip
// over AMQP 1.0 (protocol=amqp) through the AMQP 1.0 plugin.
func TestRabbitMQPlans(t *testing.T) {
	env := rabbit(t)
	amqpURL := testenv.Broker(t, "PLANRUN_TEST_AMQP")
	au, err := url.Parse(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	au.User = url.UserPassword("guest", "guest")
	queue := uniq("planrun-cold")
	out := t.TempDir()
	for _, c := range []struct {
		plan string
		args []string
	}{
		{"rabbitmq-cold-read", []string{"--set", "url=" + env.url, "--set", "queue=" + queue, "--set", "backlog=2MiB",
			"--set", "warm=3s", "--set", "cold=30s", "--set", "threads=16", "--set", "consumers=2"}},
		{"artemis-roundtrip", []string{"--set", "protocol=amqp", "--set", "url=" + au.String(), "--set", "n=2000", "--set", "size=11B,1KB",
			"--set", "request=" + uniq("planrun-request"), "--set", "reply=" + uniq("planrun-reply")}},
	} {
		t.Run(c.plan, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"-q", "--out", out}, c.args...)
			if code := run(append(args, "plans/"+c.plan+".yaml"), &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
			}
			res, err := results.Load(out + "/" + c.plan + ".json")
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res.Runs {
				for name, w := range r.Metrics.Workloads {
					if w.Lost != 0 || w.Failed != 0 {
						t.Errorf("run %d: %s lost %d, failed %d", i, name, w.Lost, w.Failed)
					}
				}
			}
			if c.plan == "rabbitmq-cold-read" {
				m := res.Runs[0].Metrics
				var cold metrics.Stats
				for _, ph := range m.Phases {
					if ph.Name == "cold-read" {
						cold = ph.Workloads["consumer"]
					}
				}
				if cold.Received*1024 < 2<<20 {
					t.Errorf("the cold read received %d messages, want the 2 MiB backlog or more", cold.Received)
				}
			}
		})
	}
}
