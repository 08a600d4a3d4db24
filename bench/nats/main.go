// Command nats compares the CPU per message and the achieved rate of
// planrun's NATS producer with `nats bench` (github.com/nats-io/natscli),
// publishing to the same subject with the same message size and rate on the
// same nats-server process, core NATS and JetStream; then it measures the
// memory planrun holds per idle connection and per consumer.
//
//	go install github.com/nats-io/natscli/nats@v0.5.0
//	go run ./bench/nats                               # 10,000 msg/s, 128 B, 10 s
//	go run ./bench/nats -rate 50000 -seconds 20 -size 1024
//	go run ./bench/nats -memory 500                   # idle connections and consumers only
//
// nats-server is Debian's (/usr/sbin/nats-server, -server to change), started
// by the program on a free loopback port with JetStream in a temporary
// directory, and stopped at the end. Each publisher runs in a child process,
// so its CPU time (user + system, from the child's rusage) is its own.
//
// Matching the rate: older `nats bench` paced a publisher only by sleeping
// --sleep between publishes, which reaches less than 1/sleep (the publish
// itself takes time, and sleeps overshoot). v0.5.0 also has --throughput,
// which, like planrun, keeps message k at start + k/rate; the program uses
// it (one client, so the aggregate rate is that client's) and no --sleep.
// It runs `nats bench` first, reads the rate it achieved from its report,
// and runs planrun at exactly that rate: both then send the same number of
// messages at the same rate, and CPU per message compares like with like.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/planrun/planrun/drivers"
	natsdrv "github.com/planrun/planrun/drivers/nats"
	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/results"
	_ "github.com/planrun/planrun/steps"
)

type options struct {
	rate, seconds, size int
	server, tool        string
	modes               string
	memory              int
	// child
	child, url, subject string
	js                  bool
}

func main() {
	var o options
	flag.IntVar(&o.rate, "rate", 10000, "messages per second to ask for")
	flag.IntVar(&o.seconds, "seconds", 10, "seconds per run")
	flag.IntVar(&o.size, "size", 128, "message size in bytes")
	flag.StringVar(&o.server, "server", "", "nats-server binary (default: /usr/sbin/nats-server or PATH)")
	flag.StringVar(&o.tool, "nats", "", "nats CLI binary (default: GOBIN, GOPATH/bin or PATH)")
	flag.StringVar(&o.modes, "modes", "core,js", "core, js or both")
	flag.IntVar(&o.memory, "memory", 200, "connections and consumers for the memory figures (0: none)")
	flag.StringVar(&o.child, "child", "", "internal: planrun or memory")
	flag.StringVar(&o.url, "url", "", "internal: server URL")
	flag.StringVar(&o.subject, "subject", "", "internal: subject")
	flag.BoolVar(&o.js, "js", false, "internal: JetStream")
	flag.Parse()
	var err error
	switch o.child {
	case "planrun":
		err = runChild(o)
	case "memory":
		err = memoryChild(o)
	case "":
		err = run(o)
	default:
		err = fmt.Errorf("unknown -child %q", o.child)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/nats:", err)
		os.Exit(1)
	}
}

type result struct {
	Acked int64   `json:"acked"`
	Rate  float64 `json:"rate"`
	P99   float64 `json:"p99"`
}

type row struct {
	name, mode string
	res        result
	cpu        float64 // seconds
	serverCPU  float64
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func findBin(given string, names ...string) (string, error) {
	if given != "" {
		return given, nil
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	if gopath, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, d := range filepath.SplitList(strings.TrimSpace(string(gopath))) {
			dirs = append(dirs, filepath.Join(d, "bin"))
		}
	}
	dirs = append(dirs, "/usr/sbin", "/usr/bin")
	for _, n := range names {
		for _, d := range dirs {
			if st, err := os.Stat(filepath.Join(d, n)); err == nil && !st.IsDir() {
				return filepath.Join(d, n), nil
			}
		}
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", names[0])
}

func run(o options) error {
	srvBin, err := findBin(o.server, "nats-server")
	if err != nil {
		return fmt.Errorf("%w: apt-get install nats-server, or give -server", err)
	}
	tool, err := findBin(o.tool, "nats")
	if err != nil {
		return fmt.Errorf("%w: go install github.com/nats-io/natscli/nats@v0.5.0, or give -nats", err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	mport, err := freePort()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-nats-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv := exec.Command(srvBin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-m", strconv.Itoa(mport), "-js", "-sd", dir, "-l", filepath.Join(dir, "log"))
	if err := srv.Start(); err != nil {
		return fmt.Errorf("starting nats-server: %w", err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	if err := waitHealthy(fmt.Sprintf("http://127.0.0.1:%d/healthz", mport)); err != nil {
		return err
	}
	ver, _ := exec.Command(srvBin, "--version").Output()
	tv, _ := exec.Command(tool, "--version").CombinedOutput()
	fmt.Printf("%s at %s (pid %d), nats CLI %s, %d B messages, %d msg/s asked, %d s per run\n",
		strings.TrimSpace(string(ver)), url, srv.Process.Pid, strings.TrimSpace(string(tv)), o.size, o.rate, o.seconds)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	n := o.rate * o.seconds
	var rows []row
	for _, mode := range strings.Split(o.modes, ",") {
		js := mode == "js"
		subject := "bench." + mode
		args := []string{"bench", "--server", url, "pub", subject}
		if js {
			args = []string{"bench", "--server", url, "js", "pub", "async", subject, "--create", "--purge", "--stream", "BENCH", "--storage", "file", "--batch", "500"}
		}
		args = append(args, "--msgs", strconv.Itoa(n), "--size", strconv.Itoa(o.size), "--throughput", strconv.Itoa(o.rate), "--clients", "1", "--no-progress")
		tr, err := measure(exec.Command(tool, args...), srv.Process.Pid, parseTool)
		if err != nil {
			return fmt.Errorf("nats bench %s: %w", mode, err)
		}
		tr.name, tr.mode = "nats bench", mode
		tr.res.Acked = int64(n)
		rows = append(rows, tr)
		matched := int(tr.res.Rate + 0.5)
		pr, err := measure(exec.Command(self, "-child", "planrun", "-url", url, "-subject", subject, "-js="+strconv.FormatBool(js),
			"-rate", strconv.Itoa(matched), "-seconds", "0", "-size", strconv.Itoa(o.size), "-memory", strconv.Itoa(n)), srv.Process.Pid, parseChild)
		if err != nil {
			return fmt.Errorf("planrun %s: %w", mode, err)
		}
		pr.name, pr.mode = "planrun", mode
		rows = append(rows, pr)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "mode\tpublisher\tmessages\tachieved msg/s\tCPU µs/msg\tnats-server CPU µs/msg\t")
	for _, r := range rows {
		per := 1e6 / float64(max(r.res.Acked, 1))
		fmt.Fprintf(w, "%s\t%s\t%d\t%.0f\t%.2f\t%.2f\t\n", r.mode, r.name, r.res.Acked, r.res.Rate, r.cpu*per, r.serverCPU*per)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for i := 0; i+1 < len(rows); i += 2 {
		t, p := rows[i], rows[i+1]
		fmt.Printf("%s: planrun uses %.2fx the CPU per message of nats bench, at %.0f msg/s against %.0f\n", t.mode,
			(p.cpu/float64(max(p.res.Acked, 1)))/(t.cpu/float64(max(t.res.Acked, 1))), p.res.Rate, t.res.Rate)
	}
	if o.memory > 0 {
		cmd := exec.Command(self, "-child", "memory", "-url", url, "-memory", strconv.Itoa(o.memory))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("memory: %w", err)
		}
	}
	return nil
}

func waitHealthy(url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("nats-server did not become healthy within 30s")
}

// measure runs cmd to its end and returns its CPU time and the server's
// CPU meanwhile, with what parse makes of its output.
func measure(cmd *exec.Cmd, serverPid int, parse func([]byte) (result, error)) (row, error) {
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	before, err := procCPU(serverPid)
	if err != nil {
		return row{}, err
	}
	if err := cmd.Run(); err != nil {
		return row{}, fmt.Errorf("%v: %w\n%s", cmd.Args, err, out.Bytes())
	}
	after, err := procCPU(serverPid)
	if err != nil {
		return row{}, err
	}
	res, err := parse(out.Bytes())
	if err != nil {
		return row{}, err
	}
	st := cmd.ProcessState
	return row{res: res, cpu: (st.UserTime() + st.SystemTime()).Seconds(), serverCPU: after - before}, nil
}

// procCPU is a process's user + system CPU seconds so far.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

func parseChild(out []byte) (result, error) {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	var res result
	if err := json.Unmarshal(lines[len(lines)-1], &res); err != nil {
		return res, fmt.Errorf("child output: %w\n%s", err, out)
	}
	return res, nil
}

// toolRate finds nats bench's publisher figures: "... stats: 9,873 msgs/sec ~ ...".
var toolRate = regexp.MustCompile(`stats:\s*([\d,.]+)\s*msgs/sec`)

func parseTool(out []byte) (result, error) {
	m := toolRate.FindSubmatch(out)
	if m == nil {
		return result{}, fmt.Errorf("no rate in nats bench's output:\n%s", out)
	}
	rate, err := strconv.ParseFloat(strings.ReplaceAll(string(m[1]), ",", ""), 64)
	return result{Rate: rate}, err
}

// runChild publishes -memory messages (the count) at -rate through
// planrun's engine, as a plan does, and prints its figures as JSON.
func runChild(o options) error {
	count := o.memory
	stream := ""
	if o.js {
		stream = `, streams: { BENCH: { subjects: [` + o.subject + `], storage: file, purge: true } }`
	}
	y := fmt.Sprintf(`name: bench-nats
targets:
  n: { driver: nats, url: "%s"%s }
workloads:
  producer: { produce: { topic: %s, size: %dB, rate: %d, count: %d, threads: 64, jetstream: %t } }
progress: 0s
steps:
  - start: producer
  - wait: "!producer.running"
    poll: 1h
    timeout: 1h
  - assert: producer.acked == %d
`, o.url, stream, o.subject, o.size, o.rate, count, o.js, count)
	src, plans, err := plan.Parse("bench.yaml", []byte(y), plan.Options{})
	if err != nil {
		return err
	}
	var log bytes.Buffer
	e := &engine.Engine{Out: &log, Version: "bench"}
	res := e.Execute(context.Background(), src, plans)
	if res.Status != results.Passed {
		return fmt.Errorf("run %s: %s\n%s", res.Status, res.Error, log.Bytes())
	}
	st := res.Runs[0].Metrics.Workloads["producer"]
	return json.NewEncoder(os.Stdout).Encode(result{Acked: st.Acked, Rate: st.Rate, P99: st.Latency.P99})
}

// rss is the process's resident set in bytes.
func rss() float64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseFloat(f[1], 64)
	return pages * float64(os.Getpagesize())
}

type memFigures struct{ rss, heap, stacks float64 }

func memNow() memFigures {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memFigures{rss: rss(), heap: float64(ms.HeapInuse), stacks: float64(ms.StackInuse)}
}

// memoryChild opens n idle producers (a connection each), then n core
// consumers, then n JetStream pull consumers (running, nothing to read),
// and prints what each holds in planrun's process.
func memoryChild(o options) error {
	n := o.memory
	ctx := context.Background()
	d, _ := drivers.Lookup("nats")
	cfg := d.NewTargetConfig().(*natsdrv.TargetConfig)
	cfg.URL = o.url
	cfg.Streams = map[string]natsdrv.StreamConfig{"MEM": {Subjects: []string{"mem.>"}, Storage: "memory"}}
	if err := cfg.Check(); err != nil {
		return err
	}
	tg, err := d.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer tg.Close()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "%d of each\tRSS KiB each\theap KiB each\tgoroutine stacks KiB each\tgoroutines each\t\n", n)
	measureEach := func(what string, open func(i int) (func(), error)) error {
		before := memNow()
		g0 := runtime.NumGoroutine()
		var closers []func()
		for i := range n {
			c, err := open(i)
			if err != nil {
				return fmt.Errorf("%s %d: %w", what, i, err)
			}
			closers = append(closers, c)
		}
		time.Sleep(time.Second) // let the connections settle
		after := memNow()
		g1 := runtime.NumGoroutine()
		k := 1024 * float64(n)
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t\n", what, (after.rss-before.rss)/k, (after.heap-before.heap)/k,
			(after.stacks-before.stacks)/k, float64(g1-g0)/float64(n))
		for _, c := range closers {
			c()
		}
		return nil
	}
	err = measureEach("idle producer (core)", func(i int) (func(), error) {
		p, err := tg.NewProducer(ctx, drivers.ProducerSpec{Workload: fmt.Sprintf("p%d", i), Topic: "mem.p", Threads: 1, Options: &natsdrv.ProduceOptions{}})
		if err != nil {
			return nil, err
		}
		return func() { _ = p.Close() }, nil
	})
	if err != nil {
		return err
	}
	consumer := func(js bool) func(i int) (func(), error) {
		return func(i int) (func(), error) {
			c, err := tg.NewConsumer(ctx, drivers.ConsumerSpec{Workload: "c", Instance: fmt.Sprintf("c%d", i), Topic: fmt.Sprintf("mem.c%d", i),
				Group: fmt.Sprintf("g%d", i), Options: &natsdrv.ConsumeOptions{JetStream: js}})
			if err != nil {
				return nil, err
			}
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { _ = c.Run(cctx, func(*drivers.Message) {}); close(done) }()
			return func() { cancel(); <-done; _ = c.Close() }, nil
		}
	}
	if err := measureEach("core consumer", consumer(false)); err != nil {
		return err
	}
	if err := measureEach("JetStream pull consumer", consumer(true)); err != nil {
		return err
	}
	return w.Flush()
}
