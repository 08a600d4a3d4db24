// Package netns_test runs planrun workers on a network of their own: each
// worker, the MQTT broker (mosquitto) and the Kafka broker (kfake, served
// by this test binary) in a network namespace of its own with an address
// of its own, joined by a bridge in the root namespace, where the
// conductor runs. It needs root, ip (iproute2), tcpdump and mosquitto:
// without them it skips, and under CI=true it fails.
package netns_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/planrun/planrun/engine/enginetest"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/results"
)

// kfakeEnv makes the test binary serve one kfake broker on its address.
const kfakeEnv = "PLANRUN_NETNS_KFAKE"

func TestMain(m *testing.M) {
	if addr := os.Getenv(kfakeEnv); addr != "" {
		os.Exit(serveKfake(addr))
	}
	os.Exit(m.Run())
}

// serveKfake serves one kfake broker on addr, in the namespace it was
// started in, until told to stop.
func serveKfake(addr string) int {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(4),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, addr) }))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake:", err)
		return 1
	}
	defer c.Close()
	fmt.Printf("kfake listening on %s\n", c.ListenAddrs()[0])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return 0
}

// count is what the plan's MQTT fleet and Kafka producer each send.
const count = 2000

// The plan: a fleet of 200 MQTT clients on workers 0 and 1 publishing to
// one topic per client, read through a wildcard by a subscriber on worker
// 2; a Kafka producer on worker 1 and its consumer group on workers 0 and
// 2. Every message is acknowledged on one worker and received on another.
// The MQTT password comes from the conductor's environment.
const planText = `name: netns
vars:
  mq: x
  kafka: x
  count: "2000"
targets:
  mq: { driver: mqtt, url: "tcp://${mq}", username: planrun, password: "${env:PLANRUN_NETNS_MQTT_PASSWORD}", reconnect_interval: 1s }
  kafka: { driver: kafka, brokers: "${kafka}", topics: { orders: { partitions: 4 } } }
workloads:
  sink:
    target: mq
    on: [2]
    consume: { topic: "devices/+/up", qos: 1 }
  fleet:
    target: mq
    on: [0, 1]
    produce: { topic: "devices/{client}/up", clients: 200, threads: 20, rate: 400, count: "${count}", qos: 1, connect_first: true }
  orders:
    target: kafka
    on: [1]
    produce: { topic: orders, size: 200B, threads: 4, rate: 1000, count: "${count}" }
  readers:
    target: kafka
    on: [0, 2]
    consume: { topic: orders, group: readers, consumers: 2 }
progress: 0s
steps:
  - start: [sink, readers]
  - start: [fleet, orders]
  - wait: "!fleet.running && !orders.running"
    timeout: 2m
  - wait: sink.received >= ${count} && readers.received >= ${count} && readers.backlog.messages == 0
    timeout: 30s
  - stop: all
`

// network is the namespaces, brokers and planrun build the runs share.
type network struct {
	*lab
	bin      string
	plan     string
	mq       *host
	mqAddr   string
	kafka    string
	workers  []*host
	token    string
	password string
}

func TestWorkersAcrossNetworkNamespaces(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	n := &network{lab: newLab(t, ctx)}
	n.bin = build(t, ctx)
	n.token, n.password = secret(t, "token"), secret(t, "password")
	n.plan = filepath.Join(n.dir, "netns.yaml")
	if err := os.WriteFile(n.plan, []byte(planText), 0o644); err != nil {
		t.Fatal(err)
	}
	n.startMosquitto(t)
	kh := n.add("kafka")
	n.kafka = kh.ip + ":9092"
	n.start(t, kh, "kfake", []string{kfakeEnv + "=" + n.kafka}, "kfake listening on", os.Args[0], "-test.run=^$")
	var ips []string
	for i := range 3 {
		h := n.add(fmt.Sprintf("w%d", i))
		n.workers = append(n.workers, h)
		ips = append(ips, "--ip", h.ip)
	}
	// The control channel's certificates, as a user makes them.
	certs := filepath.Join(n.dir, "certs")
	if out, err := exec.CommandContext(ctx, n.bin, append([]string{"certs", certs}, ips...)...).CombinedOutput(); err != nil {
		t.Fatalf("planrun certs: %v\n%s", err, out)
	}
	tlsFlags := func(side string) []string {
		return []string{"--tls-cert", filepath.Join(certs, side+".crt"), "--tls-key", filepath.Join(certs, side+".key"), "--tls-ca", filepath.Join(certs, "ca.crt")}
	}
	workerTLS, conductorTLS := tlsFlags("worker"), tlsFlags("conductor")

	// The same run in plain TCP and in TLS, each with a capture of worker
	// 0's control connection on its namespace's link: the plan's secret and
	// the token cross the network readable in the first, not in the second.
	t.Run("plain", func(t *testing.T) {
		addrs, _ := n.startWorkers(t, []string{"--insecure"})
		stop := n.capture(t, n.workers[0])
		r := n.conduct(t, addrs, nil)
		payload := stop()
		n.checkCounts(t, r)
		for what, s := range map[string]string{"token": n.token, "MQTT password": n.password} {
			if !payload.contains(s) {
				t.Errorf("the plain capture of worker 0's control connection (%d bytes of TCP payload) lacks the %s", payload.size(), what)
			}
		}
	})

	t.Run("tls", func(t *testing.T) {
		addrs, _ := n.startWorkers(t, workerTLS)
		stop := n.capture(t, n.workers[0])
		r := n.conduct(t, addrs, conductorTLS)
		payload := stop()
		n.checkCounts(t, r)
		for what, s := range map[string]string{"token": n.token, "MQTT password": n.password} {
			if payload.contains(s) {
				t.Errorf("the TLS capture of worker 0's control connection holds the %s", what)
			}
		}
		// Each direction opens with a TLS handshake record (22, version 3.x).
		if !payload.startsWith([]byte{0x16, 0x03}) {
			t.Errorf("the capture does not open with TLS handshakes: %d streams", len(payload.streams))
		}
	})

	t.Run("delay", func(t *testing.T) {
		addrs, _ := n.startWorkers(t, workerTLS)
		addrs[1] = delayed(t, addrs[1], 50*time.Millisecond)
		r := n.conduct(t, addrs, conductorTLS)
		n.checkCounts(t, r)
		ws := r.res.Runs[0].Workers
		if len(ws) != 3 {
			t.Fatalf("%d workers in the result", len(ws))
		}
		rtt := ws[1].RTTMs - (ws[0].RTTMs+ws[2].RTTMs)/2
		off := ws[1].OffsetMs - (ws[0].OffsetMs+ws[2].OffsetMs)/2
		t.Logf("round trip ms %.3f / %.3f / %.3f, clock offset ms %.3f / %.3f / %.3f: the delayed worker's round trip %+.3f ms, offset %+.3f ms",
			ws[0].RTTMs, ws[1].RTTMs, ws[2].RTTMs, ws[0].OffsetMs, ws[1].OffsetMs, ws[2].OffsetMs, rtt, off)
		if rtt < 30 || rtt > 70 {
			t.Errorf("the delayed worker's round trip is %.3f ms longer than the others', want 50 ± 20", rtt)
		}
		if off < 5 || off > 45 {
			t.Errorf("the delayed worker's clock offset moved %+.3f ms, want +25 ± 20 (its clock is read 50 ms after the request left, its answer comes at once)", off)
		}
		if !strings.Contains(r.stdout, addrs[1]) {
			t.Errorf("the Workers table does not name the delayed worker's address %s:\n%s", addrs[1], r.stdout)
		}
	})

	t.Run("link cut", func(t *testing.T) {
		addrs, workers := n.startWorkers(t, workerTLS)
		var cut time.Time
		r := n.conductWhile(t, addrs, append([]string{"--set", "count=100000000"}, conductorTLS...), func(ctx context.Context, out string) {
			// Cut once both workloads of the worker to cut have had
			// acknowledgements merged: the report must keep them.
			if waitAcked(t, ctx, filepath.Join(out, "netns.series.jsonl"), "fleet", "orders") {
				// Up again before the processes end, so that their
				// connections close at once rather than keep the
				// namespaces alive until the kernel gives up on them.
				t.Cleanup(func() { _ = exec.Command("ip", "link", "set", n.workers[1].link, "up").Run() })
				ipCmd(t, "link", "set", n.workers[1].link, "down")
				cut = time.Now()
			}
		})
		if cut.IsZero() {
			t.Fatalf("the run ended before it sampled (exit %d):\n%s", r.code, r.stderr)
		}
		took := r.ended.Sub(cut)
		t.Logf("the run ended %v after worker 1's link went down: exit %d, %s", took.Round(time.Millisecond), r.code, lastLine(r.stderr))
		if took > 20*time.Second {
			t.Errorf("the run ended %v after the cut, want within 20s (3 s without an answer loses a worker)", took)
		}
		if r.code != 3 {
			t.Errorf("exit %d, want 3", r.code)
		}
		want := fmt.Sprintf("worker 1 (%s) lost", addrs[1])
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
		if r.res.Status != results.Failed || !strings.Contains(r.res.Error, want) {
			t.Errorf("result %s, error %q: want failed, naming worker 1", r.res.Status, r.res.Error)
		}
		if m := r.res.Runs[0].Metrics.Workloads; m["fleet"].Acked == 0 || m["orders"].Acked == 0 {
			t.Errorf("the report lost what was measured before the cut: fleet acked %d, orders acked %d", m["fleet"].Acked, m["orders"].Acked)
		}
		// The workers the conductor still reached were released.
		left := regexp.MustCompile(`conductor ` + regexp.QuoteMeta(n.net+".1") + `:\d+ left`)
		ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
		defer cancel()
		for _, i := range []int{0, 2} {
			if !workers[i].out.await(ctx, left) {
				t.Errorf("worker %d was not released within 10 s of the run's end:\n%s", i, workers[i].out)
			}
		}
	})
}

// startMosquitto starts mosquitto in a namespace of its own, with a user
// and password, publishing its $SYS counters every second.
func (n *network) startMosquitto(t *testing.T) {
	t.Helper()
	n.mq = n.add("mq")
	n.mqAddr = n.mq.ip + ":1883"
	dir := filepath.Join(n.dir, "mosquitto")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(dir, "passwd")
	if out, err := exec.Command("mosquitto_passwd", "-b", "-c", pw, "planrun", n.password).CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_passwd: %v: %s", err, out)
	}
	conf := filepath.Join(dir, "mosquitto.conf")
	text := fmt.Sprintf(`user root
persistence false
log_dest stderr
log_type error
log_type warning
listener 1883 %s
allow_anonymous false
password_file %s
max_queued_messages 0
max_inflight_messages 0
sys_interval 1
`, n.mq.ip, pw)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p := n.start(t, n.mq, "mosquitto", nil, "", "mosquitto", "-c", conf)
	n.waitTCP(t, n.mqAddr, p)
}

// mqttReceived is mosquitto's own count of the PUBLISH packets it received.
func (n *network) mqttReceived(t *testing.T) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(n.ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "mosquitto_sub", "-h", n.mq.ip, "-p", "1883", "-u", "planrun", "-P", n.password,
		"-C", "1", "-W", "10", "-t", "$SYS/broker/publish/messages/received").CombinedOutput()
	if err != nil {
		t.Fatalf("mosquitto_sub: %v: %s", err, out)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("mosquitto_sub said %q", out)
	}
	return v
}

// kafkaRecords is the sum of the end offsets of the plan's topic on the
// Kafka broker (0 before the plan creates it).
func (n *network) kafkaRecords(t *testing.T) int64 {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Net.DialTimeout, cfg.Net.ReadTimeout, cfg.Net.WriteTimeout = 5*time.Second, 5*time.Second, 5*time.Second
	client, err := sarama.NewClient([]string{n.kafka}, cfg)
	if err != nil {
		t.Fatalf("kafka: %v", err)
	}
	defer client.Close()
	parts, err := client.Partitions("orders")
	if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return 0
	}
	if err != nil {
		t.Fatalf("kafka: partitions of orders: %v", err)
	}
	var sum int64
	for _, p := range parts {
		end, err := client.GetOffset("orders", p, sarama.OffsetNewest)
		if err != nil {
			t.Fatalf("kafka: end of orders/%d: %v", p, err)
		}
		sum += end
	}
	return sum
}

// startWorkers starts planrun worker in each worker namespace on its own
// address; they end with the subtest.
func (n *network) startWorkers(t *testing.T, flags []string) ([]string, []*proc) {
	t.Helper()
	var addrs []string
	var procs []*proc
	for _, h := range n.workers {
		addr := fmt.Sprintf("%s:%d", h.ip, controlPort)
		argv := append([]string{n.bin, "worker", "--listen", addr, "--token", n.token}, flags...)
		p := n.start(t, h, "worker "+h.name, nil, "worker listening on", argv...)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("worker %s said:\n%s", h.name, p.out)
			}
		})
		addrs = append(addrs, addr)
		procs = append(procs, p)
	}
	return addrs, procs
}

// runResult is one conductor run: its exit code, output and result.
type runResult struct {
	code           int
	stdout, stderr string
	res            *results.Result
	ended          time.Time
	mqttReceived   int64 // PUBLISH packets mosquitto received during the run
	mqttReceivedOK bool
	kafkaRecords   int64 // records the Kafka broker took during the run
}

// conduct runs the plan with planrun run --workers in the root namespace.
func (n *network) conduct(t *testing.T, addrs, flags []string) *runResult {
	t.Helper()
	return n.conductWhile(t, addrs, flags, nil)
}

// conductWhile runs the plan and calls during with the output directory
// while the run goes on; during's context ends with the run.
func (n *network) conductWhile(t *testing.T, addrs, flags []string, during func(ctx context.Context, out string)) *runResult {
	t.Helper()
	before, kafkaBefore := n.mqttReceived(t), n.kafkaRecords(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(n.ctx, 3*time.Minute)
	defer cancel()
	args := append([]string{"run", "--quiet", "--out", out, "--workers", strings.Join(addrs, ","), "--token", n.token,
		"--set", "mq=" + n.mqAddr, "--set", "kafka=" + n.kafka}, flags...)
	args = append(args, n.plan)
	cmd := exec.CommandContext(ctx, n.bin, args...)
	cmd.Env = append(os.Environ(), "PLANRUN_NETNS_MQTT_PASSWORD="+n.password)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	running, ended := context.WithCancel(ctx)
	defer ended()
	go func() {
		done <- cmd.Wait()
		ended()
	}()
	if during != nil {
		during(running, out)
	}
	err := <-done
	r := &runResult{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String(), ended: time.Now()}
	if ctx.Err() != nil {
		t.Fatalf("the conductor did not end within 3 minutes (%v):\n%s", err, r.stderr)
	}
	data, err := os.ReadFile(filepath.Join(out, "netns.json"))
	if err != nil {
		t.Fatalf("exit %d, no result: %v\n%s", r.code, err, r.stderr)
	}
	r.res = &results.Result{}
	if err := json.Unmarshal(data, r.res); err != nil {
		t.Fatal(err)
	}
	enginetest.CheckResult(t, r.res)
	if strings.Contains(r.stdout+r.stderr+string(data), n.password) || strings.Contains(r.stdout+r.stderr+string(data), n.token) {
		t.Error("the conductor's output or result holds the MQTT password or the token")
	}
	if r.code == 0 {
		r.mqttReceived, r.mqttReceivedOK = n.awaitMQTTReceived(t, before+count)
		r.mqttReceived -= before
		r.kafkaRecords = n.kafkaRecords(t) - kafkaBefore
	}
	return r
}

// awaitMQTTReceived waits (up to 10 s: mosquitto publishes $SYS every
// second) for mosquitto's count to reach want and returns the last count.
func (n *network) awaitMQTTReceived(t *testing.T, want int64) (int64, bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := n.mqttReceived(t)
		if got == want {
			return got, true
		}
		if got > want || time.Now().After(deadline) {
			return got, false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkCounts checks that the run passed and that the merged counts are
// the plan's, exactly, and mosquitto's own.
func (n *network) checkCounts(t *testing.T, r *runResult) {
	t.Helper()
	if r.code != 0 || r.res.Status != results.Passed {
		t.Fatalf("exit %d, status %s: %s\n%s", r.code, r.res.Status, r.res.Error, r.stderr)
	}
	m := r.res.Runs[0].Metrics.Workloads
	fleet, sink, orders, readers := m["fleet"], m["sink"], m["orders"], m["readers"]
	if fleet.Acked != count || fleet.Failed != 0 || orders.Acked != count || orders.Failed != 0 {
		t.Errorf("acked %d and %d (failed %d and %d), want %d each", fleet.Acked, orders.Acked, fleet.Failed, orders.Failed, count)
	}
	for name, st := range map[string]struct{ received, lost, dups int64 }{
		"sink": {sink.Received, sink.Lost, sink.Duplicates}, "readers": {readers.Received, readers.Lost, readers.Duplicates}} {
		if st.received != count || st.lost != 0 || st.dups != 0 {
			t.Errorf("%s: received %d, lost %d, duplicates %d: want %d, 0, 0", name, st.received, st.lost, st.dups, count)
		}
	}
	t.Logf("fleet acked %d, sink received %d, mosquitto received %d PUBLISH packets; orders acked %d, readers received %d, the topic grew by %d records",
		fleet.Acked, sink.Received, r.mqttReceived, orders.Acked, readers.Received, r.kafkaRecords)
	if r.kafkaRecords != orders.Acked {
		t.Errorf("the Kafka broker's partitions grew by %d records during the run, the producer acked %d", r.kafkaRecords, orders.Acked)
	}
	if !r.mqttReceivedOK {
		t.Errorf("mosquitto received %d PUBLISH packets during the run, the fleet acked %d", r.mqttReceived, fleet.Acked)
	}
	if !strings.Contains(r.stdout, "Workers") {
		t.Errorf("no Workers table in the report:\n%s", r.stdout)
	}
}

// waitAcked waits until the series file at path holds a state with
// acknowledgements for each of the workloads named.
func waitAcked(t *testing.T, ctx context.Context, path string, names ...string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		b, _ := os.ReadFile(path)
		acked := map[string]bool{}
		for _, line := range strings.Split(string(b), "\n") {
			var l metrics.SeriesLine
			if json.Unmarshal([]byte(line), &l) == nil && l.State != nil && l.State.Acked > 0 {
				acked[l.Workload] = true
			}
		}
		all := true
		for _, n := range names {
			all = all && acked[n]
		}
		if all {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
