// Command mqtt-connections measures what MQTT connections cost the client,
// for planrun's MQTT driver with each of its clients (paho, the default,
// and lean) side by side: how fast connections are made, the memory an idle
// connection holds, and the CPU time per QoS 1 message when the connected
// clients publish at a fixed rate:
//
//	go run ./bench/mqtt-connections                      # embedded broker
//	go run ./bench/mqtt-connections -url tcp://127.0.0.1:18831 -counts 1000,10000 \
//	    -broker-pid $(cat /var/lib/planrun-services/mosquitto/mosquitto.pid)
//
// Without -url the embedded broker runs in a child process, so the memory
// and CPU figures are the client's alone. For each count and client, one
// producer connects that many clients (connect_rate 0, as fast as the broker
// takes them, at most 512 handshakes at a time); memory per connection is
// the growth of the Go heap, of goroutine stacks and of the process's resident set,
// between before connecting and after all clients are connected and idle,
// divided by the clients. Then the clients publish QoS 1 messages of -size
// bytes round robin at -msgrate for -duration, paced evenly as a planrun
// workload is, and CPU per message is the process's user+system CPU time
// in that phase divided by the messages acknowledged.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/drivers/mqtt"
	embedded "github.com/planrun/planrun/embedded/mqtt"
)

func main() {
	url := flag.String("url", "", "broker URL (default: an embedded broker in a child process)")
	counts := flag.String("counts", "1000,10000", "comma-separated connection counts to measure")
	clientList := flag.String("clients", "paho,lean", "comma-separated MQTT clients of the driver to measure (paho, lean)")
	version := flag.Int("protocol-version", 4, "MQTT protocol level: 4 (3.1.1) or 5 (lean only)")
	rate := flag.Float64("rate", 0, "connect_rate for the driver (0 = unlimited, as fast as the broker accepts)")
	keepAlive := flag.Duration("keepalive", 60*time.Second, "MQTT keep-alive of every client")
	settle := flag.Duration("settle", 2*time.Second, "idle time after connecting, before memory is read")
	msgRate := flag.Float64("msgrate", 10000, "QoS 1 messages per second over all clients in the publish phase (0: no publish phase)")
	duration := flag.Duration("duration", 10*time.Second, "length of the publish phase")
	size := flag.Int("size", 100, "message size in bytes")
	sources := flag.String("source-addrs", "127.0.0.1,127.0.0.2,127.0.0.3,127.0.0.4", "local addresses to spread connections over (loopback brokers only; empty: the default)")
	serve := flag.Bool("serve-broker", false, "internal: run the embedded broker and print its address")
	brokerPid := flag.Int("broker-pid", 0, "pid of the broker process, to report its CPU time per connection too (the embedded broker's child is read by itself)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the client to this file")
	memProfile := flag.String("memprofile", "", "write a heap profile, taken when the last measurement's clients are connected and idle, to this file")
	flag.Parse()

	raiseFileLimit()
	if *serve {
		serveBroker()
		return
	}
	var ns []int
	for _, s := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fatalf("bad -counts entry %q", s)
		}
		ns = append(ns, n)
	}
	kinds := strings.Split(*clientList, ",")
	target := *url
	where := target
	if target == "" {
		var stop func()
		target, *brokerPid, stop = startChildBroker()
		defer stop()
		where = "embedded mochi-mqtt " + embedded.Version + " (child process) at " + target
	}
	var addrs []string
	if *sources != "" {
		addrs = strings.Split(*sources, ",")
	}
	var nofile syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile)
	fmt.Printf("broker: %s\nclient: %s, GOMAXPROCS %d, NumCPU %d, RLIMIT_NOFILE %d, keepalive %s, protocol level %d\n",
		where, runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), nofile.Cur, *keepAlive, *version)
	if *msgRate > 0 {
		fmt.Printf("publish phase: QoS 1, %d-byte messages, %g msg/s for %s\n", *size, *msgRate, *duration)
	}
	fmt.Println()

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fatalf("%v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fatalf("%v", err)
		}
		defer pprof.StopCPUProfile()
	}

	targets := map[string]drivers.Target{}
	for _, k := range kinds {
		cfg := &mqtt.TargetConfig{URL: target, Client: k, SourceAddrs: addrs}
		if *version != 4 {
			cfg.ProtocolVersion = *version
		}
		tg, err := mqtt.Driver.Open(context.Background(), cfg)
		if err != nil {
			fatalf("%s: %v", k, err)
		}
		defer tg.Close()
		targets[k] = tg
	}
	b := bench{brokerPid: *brokerPid, memProfile: *memProfile, keepAlive: *keepAlive, rate: *rate, settle: *settle, msgRate: *msgRate, duration: *duration,
		payload: make([]byte, *size)}

	// Warm up: the Go runtime keeps goroutine descriptors and stack memory
	// for reuse, so whichever client ran first would otherwise be charged
	// for growing them.
	most := 0
	for _, n := range ns {
		most = max(most, n)
	}
	warm := b
	warm.settle, warm.msgRate = 0, 0
	warm.run(targets[kinds[0]], "warm-up", most)

	var rows []result
	for _, n := range ns {
		for _, k := range kinds {
			rows = append(rows, b.run(targets[k], k, n))
		}
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "clients\tclient\tconnect/s\tclient CPU us/conn\tbroker CPU us/conn\theap KiB/conn\tstacks KiB/conn\tRSS KiB/conn\tgoroutines/conn\tmsg/s\tCPU us/msg\tof it sys\tcores\tp99 ms\tfailed\tdisconnect s\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%d\t%s\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.1f\t%.1f\t%.2f\t%.1f\t%d\t%.2f\t\n", r.n, r.name, r.rate, r.connCPU, r.brokerConnCPU, r.heap/1024, r.stack/1024, r.rss/1024,
			r.goroutines, r.msgs, r.cpuPerMsg, r.sysPerMsg, r.cores, r.p99ms, r.failed, r.disconnect.Seconds())
	}
	w.Flush()
}

type bench struct {
	brokerPid                   int
	memProfile                  string
	keepAlive, settle, duration time.Duration
	rate, msgRate               float64
	payload                     []byte
}

type result struct {
	name             string
	n                int
	rate             float64
	connCPU          float64 // client CPU per connection, microseconds
	brokerConnCPU    float64 // broker CPU per connection, microseconds
	heap, stack, rss float64 // bytes per connection
	goroutines       float64
	msgs             float64 // acknowledged per second in the publish phase
	cpuPerMsg        float64 // microseconds, user and system
	sysPerMsg        float64 // microseconds, system alone
	cores            float64
	p99ms            float64
	failed           int64
	disconnect       time.Duration
}

type snapshot struct {
	heap, stack, rss uint64
	goroutines       int
}

func snap() snapshot {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return snapshot{heap: ms.HeapAlloc, stack: ms.StackInuse, rss: rss(), goroutines: runtime.NumGoroutine()}
}

// rss reads the resident set size from /proc.
func rss() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() (user, sys time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// run connects n clients of one producer, reads the memory they hold idle,
// publishes at msgRate and disconnects them.
func (b bench) run(tg drivers.Target, name string, n int) result {
	before := snap()
	u0, s0 := cpuTime()
	b0 := procCPU(b.brokerPid)
	start := time.Now()
	topic := "planrun-bench/{client}"
	senders := 512
	p, err := tg.NewProducer(context.Background(), drivers.ProducerSpec{Workload: "bench", Topic: topic, Threads: senders,
		Options: &mqtt.ProduceOptions{Clients: n, ConnectRate: b.rate, KeepAlive: b.keepAlive, QoS: &qos1}})
	if err != nil {
		fatalf("%s: producer: %v", name, err)
	}
	g := p.(drivers.Gauger)
	deadline := start.Add(5 * time.Minute)
	for int(g.Gauges()["connected"]) < n {
		if time.Now().After(deadline) {
			fatalf("%s: only %g of %d clients connected after 5 minutes", name, g.Gauges()["connected"], n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	u1, s1 := cpuTime()
	connCPU := float64((u1 + s1 - u0 - s0).Microseconds()) / float64(n)
	brokerCPU := float64((procCPU(b.brokerPid) - b0).Microseconds()) / float64(n)
	fmt.Fprintf(os.Stderr, "%-8s %6d clients: connected in %s\n", name, n, took.Round(time.Millisecond))
	time.Sleep(b.settle)
	after := snap()
	if b.memProfile != "" {
		writeHeapProfile(b.memProfile)
	}
	r := result{name: name, n: n, rate: float64(n) / took.Seconds(), connCPU: connCPU, brokerConnCPU: brokerCPU,
		heap:       (float64(after.heap) - float64(before.heap)) / float64(n),
		stack:      (float64(after.stack) - float64(before.stack)) / float64(n),
		rss:        (float64(after.rss) - float64(before.rss)) / float64(n),
		goroutines: float64(after.goroutines-before.goroutines) / float64(n)}
	if b.msgRate > 0 {
		b.publish(p, topic, n, senders, &r)
	}
	ds := time.Now()
	_ = p.Close()
	r.disconnect = time.Since(ds)
	// Let the closed clients' goroutines end before the next measurement.
	for i := 0; i < 500 && runtime.NumGoroutine() > before.goroutines+10; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	return r
}

var qos1 = 1

func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fatalf("%v", err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		fatalf("%v", err)
	}
}

// publish sends QoS 1 messages round robin over the n clients at msgRate,
// each due at its intended time (a pacer hands due messages to a fixed set
// of senders), and records CPU time per acknowledged message and the 99th
// percentile of latency from the intended send time.
func (b bench) publish(p drivers.Producer, topic string, n, senders int, r *result) {
	total := int(b.msgRate * b.duration.Seconds())
	due := make(chan int, total)
	lat := make([]time.Duration, total)
	var failed atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	start := time.Now()
	iv := time.Duration(float64(time.Second) / b.msgRate)
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range due {
				m := drivers.Message{Topic: topic, Value: b.payload, Source: k % n}
				if err := p.Send(ctx, &m); err != nil {
					failed.Add(1)
					lat[k] = -1
					continue
				}
				lat[k] = time.Since(start.Add(time.Duration(k) * iv))
			}
		}()
	}
	user0, sys0 := cpuTime()
	for k := 0; k < total; {
		now := time.Since(start)
		for ; k < total && time.Duration(k)*iv <= now; k++ {
			due <- k
		}
		time.Sleep(time.Millisecond)
	}
	close(due)
	wg.Wait()
	user1, sys1 := cpuTime()
	user, sys := user1-user0, sys1-sys0
	cpu := user + sys
	wall := time.Since(start)
	acked := int64(total) - failed.Load()
	r.failed = failed.Load()
	r.msgs = float64(acked) / wall.Seconds()
	if acked > 0 {
		r.cpuPerMsg = float64(cpu.Microseconds()) / float64(acked)
		r.sysPerMsg = float64(sys.Microseconds()) / float64(acked)
	}
	r.cores = cpu.Seconds() / wall.Seconds()
	ok := lat[:0]
	for _, l := range lat {
		if l >= 0 {
			ok = append(ok, l)
		}
	}
	if len(ok) > 0 {
		slices.Sort(ok)
		r.p99ms = float64(ok[len(ok)*99/100]) / 1e6
	}
}

// raiseFileLimit lifts RLIMIT_NOFILE as far as the kernel allows: every
// connection is a descriptor, and the default soft limit (1024) is far below
// 10k. As root the hard limit can be raised too.
func raiseFileLimit() {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return
	}
	want := uint64(1 << 20)
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			want = v
		}
	}
	if l.Max < want {
		nl := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &nl) == nil {
			return
		}
	}
	l.Cur = l.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}

// serveBroker runs the embedded broker until stdin closes.
func serveBroker() {
	b, err := embedded.Start(embedded.Options{})
	if err != nil {
		fatalf("%v", err)
	}
	fmt.Println(b.URL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	eof := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		close(eof)
	}()
	select {
	case <-sig:
	case <-eof:
	}
	_ = b.Close()
}

// procCPU is the user and system CPU time of process pid (0: none), read
// from /proc in clock ticks of 10 ms.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// startChildBroker starts this program as the broker and returns its URL,
// its pid and a function that stops it.
func startChildBroker() (string, int, func()) {
	exe, err := os.Executable()
	if err != nil {
		fatalf("%v", err)
	}
	cmd := exec.Command(exe, "-serve-broker")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fatalf("%v", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fatalf("%v", err)
	}
	if err := cmd.Start(); err != nil {
		fatalf("start broker: %v", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		fatalf("broker did not start: %v", err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid, func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "mqtt-connections: "+format+"\n", a...)
	os.Exit(1)
}
