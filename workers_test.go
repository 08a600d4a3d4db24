package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	embeddedmqtt "github.com/planrun/planrun/embedded/mqtt"
	"github.com/planrun/planrun/engine/enginetest"
	"github.com/planrun/planrun/results"
)

// TestMain lets the test binary serve as a planrun worker process, or as
// planrun itself (runChild).
func TestMain(m *testing.M) {
	runChild()
	if os.Getenv(faultEnv) != "" {
		os.Exit(kafkaFault(os.Stdout, os.Stderr))
	}
	if addr := os.Getenv("PLANRUN_TEST_WORKER_LISTEN"); addr != "" {
		os.Exit(run([]string{"worker", "--listen", addr, "--token", "t0k"}, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// startWorkers starts n worker processes on loopback, with env added to
// their environment, and returns their addresses and processes.
func startWorkers(t *testing.T, n int, env ...string) ([]string, []*exec.Cmd) {
	t.Helper()
	var addrs []string
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), "PLANRUN_TEST_WORKER_LISTEN=127.0.0.1:0"), env...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatalf("worker did not say where it listens: %v", err)
		}
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "worker listening on ")
		if !ok {
			t.Fatalf("worker said %q", line)
		}
		addrs = append(addrs, addr)
		cmds = append(cmds, cmd)
	}
	return addrs, cmds
}

const fleetPlan = `name: fleet
vars:
  count: "6000"
targets:
  mem: { driver: memory }
workloads:
  producer:
    produce: { topic: t, size: 100B, threads: 4, rate: 6000, count: "${count}" }
progress: 0s
steps:
  - start: producer
  - wait: "!producer.running"
    timeout: 60s
`

func loadResult(t *testing.T, dir, name string) *results.Result {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var res results.Result
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	enginetest.CheckResult(t, &res)
	return &res
}

func TestWorkersSplitCountsLikeOneProcess(t *testing.T) {
	addrs, _ := startWorkers(t, 3)
	dir := t.TempDir()
	file := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(file, []byte(fleetPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"run", "--quiet", "--workers", strings.Join(addrs, ","), "--token", "t0k", "--out", dir, file}, io.Discard, io.Discard); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	res := loadResult(t, dir, "fleet")
	st := res.Runs[0].Metrics.Workloads["producer"]
	if st.Acked != 6000 || st.Latency.Count != 6000 {
		t.Errorf("acked %d, latencies %d: want 6000 each", st.Acked, st.Latency.Count)
	}
	if n := len(res.Runs[0].Workers); n != 3 {
		t.Errorf("%d workers in the result, want 3", n)
	}
	for _, w := range res.Runs[0].Workers {
		if w.FirstMessageS <= 0 || w.ReceivedBytes == 0 || w.SentBytes == 0 {
			t.Errorf("worker %d: first message at %gs, control traffic %d bytes in, %d out: want all measured", w.Index, w.FirstMessageS, w.ReceivedBytes, w.SentBytes)
		}
	}
	single := t.TempDir()
	if code := run([]string{"run", "--quiet", "--out", single, file}, io.Discard, io.Discard); code != exitOK {
		t.Fatalf("single process: exit %d", code)
	}
	if one := loadResult(t, single, "fleet").Runs[0].Metrics.Workloads["producer"]; one.Acked != st.Acked {
		t.Errorf("one process acked %d, workers %d", one.Acked, st.Acked)
	}
}

func TestWorkerRefusesWrongToken(t *testing.T) {
	addrs, _ := startWorkers(t, 1)
	dir := t.TempDir()
	file := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(file, []byte(fleetPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	var errOut strings.Builder
	code := run([]string{"run", "--quiet", "--workers", addrs[0], "--token", "wrong", "--out", dir, file}, io.Discard, &errOut)
	if code != exitRunFailure || !strings.Contains(errOut.String(), "worker 0") || !strings.Contains(errOut.String(), "token") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

func TestLostWorkerEndsTheRun(t *testing.T) {
	addrs, cmds := startWorkers(t, 3)
	dir := t.TempDir()
	file := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(file, []byte(fleetPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	var errOut strings.Builder
	go func() {
		done <- run([]string{"run", "--quiet", "--set", "count=100000000", "--workers", strings.Join(addrs, ","), "--token", "t0k", "--out", dir, file}, io.Discard, &errOut)
	}()
	// Kill a worker once the run is sending: the series file shows it.
	series := filepath.Join(dir, "fleet.series.jsonl")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, _ := os.ReadFile(series); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run never sampled")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmds[1].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var code int
	select {
	case code = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the conductor did not end within 5s of losing a worker")
	}
	t.Logf("ended %v after the kill", time.Since(killed))
	if code != exitRunFailure {
		t.Errorf("exit %d, want %d", code, exitRunFailure)
	}
	res := loadResult(t, dir, "fleet")
	if res.Status != results.Failed || !strings.Contains(res.Error, "worker 1 ("+addrs[1]+") lost") {
		t.Errorf("status %s, error %q: want failed naming worker 1", res.Status, res.Error)
	}
	if res.Runs[0].Metrics.Workloads["producer"].Acked == 0 {
		t.Error("the report lost what was measured")
	}
}

func TestMQTTFleetSplitKeepsClientIndexesDense(t *testing.T) {
	broker, err := embeddedmqtt.Start(embeddedmqtt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	addrs, _ := startWorkers(t, 3)
	dir := t.TempDir()
	file := filepath.Join(dir, "mqttfleet.yaml")
	const clients = 31
	planText := fmt.Sprintf(`name: mqttfleet
targets:
  mq: { driver: mqtt, url: "%s" }
workloads:
  fleet:
    connect: { clients: %d, client_id: "dev-{client}" }
progress: 0s
steps:
  - start: fleet
  - wait: fleet.gauges.connected == %d
    timeout: 30s
  - sleep: 3s
`, broker.URL(), clients, clients)
	if err := os.WriteFile(file, []byte(planText), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"run", "--quiet", "--workers", strings.Join(addrs, ","), "--token", "t0k", "--out", dir, file}, io.Discard, io.Discard)
	}()
	want := map[string]bool{}
	for i := range clients {
		want[fmt.Sprintf("dev-%d", i)] = true
	}
	var got map[string]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = broker.RemoteAddrs()
		if len(got) >= clients || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(got) != clients {
		t.Errorf("%d clients connected, want %d", len(got), clients)
	}
	for id := range got {
		if !want[id] {
			t.Errorf("unexpected client id %q", id)
		}
	}
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d", code)
	}
	res := loadResult(t, dir, "mqttfleet")
	g := res.Runs[0].Metrics.Workloads["fleet"].Gauges
	if g["clients"] != clients || g["reconnects"] != 0 {
		t.Errorf("gauges %v: want %d clients, no reconnects (a duplicate id would take another's connection over)", g, clients)
	}
}

// A set step reaches every shard: each takes its part of the new rate, so
// the workload reaches a count it could not reach at the old rate, at
// about the new rate.
func TestWorkersSetRateReachesEveryShard(t *testing.T) {
	addrs, _ := startWorkers(t, 2)
	dir := t.TempDir()
	file := filepath.Join(dir, "set.yaml")
	plan := `name: set
targets:
  mem: { driver: memory }
workloads:
  producer:
    produce: { topic: t, size: 100B, threads: 4, rate: 100 }
progress: 0s
steps:
  - start: producer
  - wait: producer.acked >= 50
    timeout: 20s
  - set: {producer.rate: 4000}
  - wait: producer.acked >= 4000
    timeout: 20s
    phase: fast
  - stop: all
  # one shard at the new rate and one at the old would make about 2050/s
  - assert: phases["fast"].producer.rate > 2800
`
	if err := os.WriteFile(file, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	var errOut strings.Builder
	if code := run([]string{"run", "--quiet", "--workers", strings.Join(addrs, ","), "--token", "t0k", "--out", dir, file}, io.Discard, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	res := loadResult(t, dir, "set")
	for _, w := range res.Runs[0].Workers {
		if len(w.Workloads) != 1 {
			t.Errorf("worker %d ran %v, want the producer's shard", w.Index, w.Workloads)
		}
	}
}
