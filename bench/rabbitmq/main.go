// Command rabbitmq compares the CPU per message of planrun's RabbitMQ
// producer with a plain amqp091-go loop with publisher confirms at the same
// rate, and measures planrun's memory per idle producer connection and per
// consumer, against a running rabbitmq-server:
//
//	eval "$(bash .ci/services.sh)"      # rabbitmq-server on 127.0.0.1:15682
//	go run ./bench/rabbitmq                                   # 2000 and 10000 msg/s, 20 s each
//	go run ./bench/rabbitmq -rates 5000 -seconds 60 -url amqp://guest:guest@host:5672/
//
// Each producer runs in a child process, so its CPU time (user + system,
// from the child's rusage) and peak RSS are its own: planrun runs a plan
// (one produce workload, 1 KiB messages, 64 threads = messages in flight)
// as a user would, reports included; the plain loop publishes the same
// number of messages on one channel in confirm mode, paced the same way
// (message k due at start + k/rate), at most 64 unconfirmed. Both publish
// to a durable classic queue that is purged before each run, non-persistent
// messages. Reported per rate and producer: CPU seconds per million
// confirmed messages, the achieved rate, peak RSS and the ratio.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/drivers/rabbitmq"
	"github.com/planrun/planrun/results"
)

const queue = "planrun-bench"

func main() {
	url := flag.String("url", os.Getenv("PLANRUN_TEST_RABBITMQ"), "broker URL (default $PLANRUN_TEST_RABBITMQ)")
	rates := flag.String("rates", "2000,10000", "target rates, msg/s, comma-separated")
	seconds := flag.Int("seconds", 20, "seconds per run")
	threads := flag.Int("threads", 64, "messages in flight unconfirmed")
	idle := flag.Int("idle", 200, "idle producers and consumers for the memory figures")
	child := flag.String("child", "", "internal: plain | memory")
	rate := flag.Int("rate", 0, "internal: the child's rate")
	flag.Parse()
	if *url == "" {
		fail(errors.New("no broker: give -url or set PLANRUN_TEST_RABBITMQ (eval \"$(bash .ci/services.sh)\")"))
	}
	switch *child {
	case "plain":
		n, err := plain(*url, *rate, *rate**seconds, *threads)
		if err != nil {
			fail(err)
		}
		fmt.Println(n)
		return
	case "memory":
		if err := memory(*url, *idle); err != nil {
			fail(err)
		}
		return
	}
	if err := compare(*url, *rates, *seconds, *threads, *idle); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench/rabbitmq:", err)
	os.Exit(1)
}

// usage is a finished child's CPU and peak RSS.
type usage struct {
	cpu    time.Duration
	rssMiB float64
	wall   time.Duration
}

func runChild(name string, args ...string) (string, usage, error) {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		return "", usage{}, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return string(out), usage{cpu: cpu, rssMiB: float64(ru.Maxrss) / 1024, wall: time.Since(start)}, nil
}

func compare(url, rates string, seconds, threads, idle int) error {
	dir, err := os.MkdirTemp("", "bench-rabbitmq")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "planrun")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build planrun: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "rate msg/s\tproducer\tconfirmed\tachieved msg/s\tCPU s\tCPU s per 1M msgs\tpeak RSS MiB\tCPU ratio\t\n")
	for _, rs := range strings.Split(rates, ",") {
		rate, err := strconv.Atoi(strings.TrimSpace(rs))
		if err != nil || rate <= 0 {
			return fmt.Errorf("rate %q", rs)
		}
		n := rate * seconds
		plan := filepath.Join(dir, "plan.yaml")
		if err := os.WriteFile(plan, []byte(fmt.Sprintf(`name: bench
targets:
  rmq: { driver: rabbitmq, url: "%s", queues: { %s: { purge: true } } }
workloads:
  p: { produce: { topic: %s, size: 1KiB, threads: %d, rate: %d, count: %d } }
progress: 0s
steps:
  - start: p
  - wait: "!p.running"
    timeout: 10m
  - assert: p.acked == %d
`, url, queue, queue, threads, rate, n, n)), 0o644); err != nil {
			return err
		}
		_, pu, err := runChild(bin, "-q", "--out", filepath.Join(dir, "out"), plan)
		if err != nil {
			return err
		}
		res, err := results.Load(filepath.Join(dir, "out", "bench.json"))
		if err != nil {
			return err
		}
		ps := res.Runs[0].Metrics.Workloads["p"]
		out, lu, err := runChild(self, "-child", "plain", "-url", url, "-rate", strconv.Itoa(rate), "-seconds", strconv.Itoa(seconds), "-threads", strconv.Itoa(threads))
		if err != nil {
			return err
		}
		confirmed, _ := strconv.Atoi(strings.TrimSpace(out))
		per := func(u usage, msgs int) float64 { return u.cpu.Seconds() / float64(msgs) * 1e6 }
		// The loop's rate is over its whole life (dial included).
		fmt.Fprintf(w, "%d\tplanrun\t%d\t%.0f\t%.2f\t%.1f\t%.1f\t%.2f\t\n", rate, ps.Acked, float64(ps.Acked)/ps.Duration, pu.cpu.Seconds(), per(pu, int(ps.Acked)), pu.rssMiB, per(pu, int(ps.Acked))/per(lu, confirmed))
		fmt.Fprintf(w, "%d\tamqp091-go loop\t%d\t%.0f\t%.2f\t%.1f\t%.1f\t\t\n", rate, confirmed, float64(confirmed)/lu.wall.Seconds(), lu.cpu.Seconds(), per(lu, confirmed), lu.rssMiB)
	}
	w.Flush()
	out, _, err := runChild(self, "-child", "memory", "-url", url, "-idle", strconv.Itoa(idle))
	if err != nil {
		return err
	}
	fmt.Print(out)
	return nil
}

// plain publishes n 1 KiB messages at rate on one confirm-mode channel,
// message k due at start + k/rate, at most threads unconfirmed, and prints
// how many the broker confirmed.
func plain(url string, rate, n, threads int) (int, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		return 0, err
	}
	if _, err := ch.QueuePurge(queue, false); err != nil {
		return 0, err
	}
	if err := ch.Confirm(false); err != nil {
		return 0, err
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, threads))
	room := make(chan struct{}, threads)
	var acked int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for c := range confirms {
			if c.Ack {
				acked++
			}
			<-room
			if int(c.DeliveryTag) == n {
				return
			}
		}
	}()
	body := make([]byte, 1024)
	start := time.Now()
	for k := 0; k < n; k++ {
		// Sleep only when a millisecond or more ahead: shorter sleeps
		// overshoot, and a late message goes at once.
		if d := time.Until(start.Add(time.Duration(k) * time.Second / time.Duration(rate))); d >= time.Millisecond {
			time.Sleep(d)
		}
		room <- struct{}{}
		if err := ch.Publish("", queue, false, false, amqp.Publishing{Body: body}); err != nil {
			return acked, err
		}
	}
	wg.Wait()
	return acked, nil
}

// memory opens idle producers (a connection and a confirm channel each)
// and consumers (a connection, a channel and a consumer each) through the
// driver and prints the heap and RSS they add, each.
func memory(url string, idle int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d, _ := drivers.Lookup("rabbitmq")
	tg, err := d.Open(ctx, &rabbitmq.TargetConfig{URL: url})
	if err != nil {
		return err
	}
	defer tg.Close()
	measure := func(what string, open func(i int) (func() error, error)) error {
		h0, r0 := footprint()
		var closers []func() error
		for i := range idle {
			c, err := open(i)
			if err != nil {
				return fmt.Errorf("%s %d: %w", what, i, err)
			}
			closers = append(closers, c)
		}
		time.Sleep(2 * time.Second) // heartbeats and buffers settle
		h1, r1 := footprint()
		fmt.Printf("per idle %s: %.1f KiB heap, %.1f KiB RSS (%d of them)\n", what, (h1-h0)/1024/float64(idle), (r1-r0)/1024/float64(idle), idle)
		for _, c := range closers {
			_ = c()
		}
		return nil
	}
	if err := measure("producer (connection + confirm channel)", func(int) (func() error, error) {
		p, err := tg.NewProducer(ctx, drivers.ProducerSpec{Workload: "idle", Topic: queue, Threads: 1})
		if err != nil {
			return nil, err
		}
		return p.Close, nil
	}); err != nil {
		return err
	}
	return measure("consumer (connection + channel + basic.consume)", func(i int) (func() error, error) {
		c, err := tg.NewConsumer(ctx, drivers.ConsumerSpec{Workload: "idle", Topic: queue + "-idle", Group: "g", Instance: strconv.Itoa(i)})
		if err != nil {
			return nil, err
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = c.Run(rctx, func(*drivers.Message) {}); close(done) }()
		return func() error { stop(); <-done; return c.Close() }, nil
	})
}

// footprint is the heap in use after a GC and the process's RSS, bytes.
func footprint() (heap, rss float64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseFloat(f[1], 64)
			rss = pages * float64(os.Getpagesize())
		}
	}
	return float64(m.HeapInuse), rss
}
