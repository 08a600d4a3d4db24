// Command mqtt-connections measures what an idle MQTT connection costs the
// client and how fast connections are made, for planrun's MQTT driver
// (its Connect, as a connect workload uses it) and for bare paho clients
// side by side:
//
//	go run ./bench/mqtt-connections                      # embedded broker
//	go run ./bench/mqtt-connections -url tcp://127.0.0.1:18831 -counts 1000,10000
//
// Without -url the embedded broker runs in a child process, so the memory
// figures are the client's alone. Memory per connection is the growth of
// the Go heap and stacks, and of the process's resident set, between before
// connecting and after all clients are connected, divided by the clients.
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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/drivers/mqtt"
	embedded "github.com/planrun/planrun/embedded/mqtt"
)

func main() {
	url := flag.String("url", "", "broker URL (default: an embedded broker in a child process)")
	counts := flag.String("counts", "1000,10000", "comma-separated connection counts to measure")
	rate := flag.Float64("rate", 0, "connect_rate for the driver (0 = unlimited, as fast as the broker accepts)")
	keepAlive := flag.Duration("keepalive", 60*time.Second, "MQTT keep-alive of every client")
	settle := flag.Duration("settle", 2*time.Second, "idle time after connecting, before memory is read")
	serve := flag.Bool("serve-broker", false, "internal: run the embedded broker and print its address")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the client to this file")
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
	target := *url
	where := target
	if target == "" {
		var stop func()
		target, stop = startChildBroker()
		defer stop()
		where = "embedded mochi-mqtt " + embedded.Version + " (child process) at " + target
	}
	var nofile syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile)
	fmt.Printf("broker: %s\nclient: %s, GOMAXPROCS %d, NumCPU %d, RLIMIT_NOFILE %d, keepalive %s\n\n",
		where, runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), nofile.Cur, *keepAlive)

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

	tg, err := mqtt.Driver.Open(context.Background(), &mqtt.TargetConfig{URL: target})
	if err != nil {
		fatalf("%v", err)
	}
	defer tg.Close()
	connector, ok := drivers.As[drivers.Connector](tg)
	if !ok {
		fatalf("mqtt targets cannot hold idle connections")
	}

	// Warm up: the Go runtime keeps goroutine descriptors and stack memory
	// for reuse, so whichever client ran first would otherwise be charged
	// for growing them.
	most := 0
	for _, n := range ns {
		most = max(most, n)
	}
	measure("warm-up", most, 0, func() (func() int, func()) {
		return connectDriver(connector, most, 0, *keepAlive)
	})

	var rows []result
	for _, n := range ns {
		rows = append(rows, measure("paho (bare)", n, *settle, func() (func() int, func()) {
			return connectPaho(target, n, *keepAlive)
		}))
		rows = append(rows, measure("planrun driver", n, *settle, func() (func() int, func()) {
			return connectDriver(connector, n, *rate, *keepAlive)
		}))
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "clients\tclient\tconnect/s\theap+stack KiB/conn\tRSS KiB/conn\tgoroutines/conn\tdisconnect s\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%d\t%s\t%.0f\t%.1f\t%.1f\t%.1f\t%.2f\t\n", r.n, r.name, r.rate, r.heap/1024, r.rss/1024, r.goroutines, r.disconnect.Seconds())
	}
	w.Flush()
}

type result struct {
	name       string
	n          int
	rate       float64
	heap, rss  float64 // bytes per connection
	goroutines float64
	disconnect time.Duration
}

type snapshot struct {
	heap, rss  uint64
	goroutines int
}

func snap() snapshot {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return snapshot{heap: ms.HeapAlloc + ms.StackInuse, rss: rss(), goroutines: runtime.NumGoroutine()}
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

// measure connects n clients with connect, which returns a count of the
// connected ones and a function that disconnects them all.
func measure(name string, n int, settle time.Duration, connect func() (func() int, func())) result {
	before := snap()
	start := time.Now()
	connected, closeAll := connect()
	deadline := start.Add(5 * time.Minute)
	for connected() < n {
		if time.Now().After(deadline) {
			fatalf("%s: only %d of %d clients connected after 5 minutes", name, connected(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	time.Sleep(settle)
	after := snap()
	ds := time.Now()
	closeAll()
	dis := time.Since(ds)
	// Let the closed clients' goroutines end before the next measurement.
	for i := 0; i < 500 && runtime.NumGoroutine() > before.goroutines+10; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	r := result{name: name, n: n, rate: float64(n) / took.Seconds(), disconnect: dis,
		heap:       (float64(after.heap) - float64(before.heap)) / float64(n),
		rss:        (float64(after.rss) - float64(before.rss)) / float64(n),
		goroutines: float64(after.goroutines-before.goroutines) / float64(n)}
	fmt.Fprintf(os.Stderr, "%-15s %6d clients: connected in %s\n", name, n, took.Round(time.Millisecond))
	return r
}

// connectDriver holds n connections with the driver's Connect.
func connectDriver(c drivers.Connector, n int, rate float64, keepAlive time.Duration) (func() int, func()) {
	conns, err := c.Connect(context.Background(), drivers.ConnectSpec{Workload: "bench",
		Options: &mqtt.ProduceOptions{Clients: n, ConnectRate: rate, KeepAlive: keepAlive}})
	if err != nil {
		fatalf("driver connect: %v", err)
	}
	return func() int { return int(conns.Gauges()["connected"]) }, func() { _ = conns.Close() }
}

// connectPaho connects n paho clients with default options, at most 512
// handshakes at a time (as the driver does with no connect_rate), retrying
// failures.
func connectPaho(url string, n int, keepAlive time.Duration) (func() int, func()) {
	var connected atomic.Int64
	clients := make([]paho.Client, n)
	sem := make(chan struct{}, 512)
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range clients {
			o := paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprintf("bare-%d", i)).SetKeepAlive(keepAlive)
			c := paho.NewClient(o)
			clients[i] = c
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					tok := c.Connect()
					tok.Wait()
					if tok.Error() == nil {
						break
					}
					time.Sleep(500 * time.Millisecond)
				}
				<-sem
				connected.Add(1)
			}()
		}
		wg.Wait()
	}()
	return func() int { return int(connected.Load()) }, func() {
		<-done
		var next atomic.Int64
		var dw sync.WaitGroup
		for range 32 {
			dw.Add(1)
			go func() {
				defer dw.Done()
				for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
					clients[i].Disconnect(250)
				}
			}()
		}
		dw.Wait()
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

// startChildBroker starts this program as the broker and returns its URL
// and a function that stops it.
func startChildBroker() (string, func()) {
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
	return strings.TrimSpace(line), func() {
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
