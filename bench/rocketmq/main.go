// Command rocketmq compares the CPU planrun's RocketMQ producer path costs
// with rocketmq-client-go's own benchmark producer, against one embedded
// broker, for the same message size and sending threads:
//
//	go run ./bench/rocketmq                                  # 200000 messages of 1024 B, 128 threads
//	go run ./bench/rocketmq -rounds 3                        # three alternating pairs: the machine drifts
//	go run ./bench/rocketmq -messages 500000 -threads 32 -acl
//	go run ./bench/rocketmq -serve                           # only the broker, to try the tool by hand
//
// The broker runs in this process; each producer runs in a child process, so
// its CPU time (user + system, from the child's rusage) is the client's alone.
// Reported: CPU seconds per million acknowledged messages, of the client and
// of the broker (this process) while it ran, for
//
//   - planrun: a produce workload over the rocketmq driver, exactly as a plan
//     runs it (pacing, 22-byte header, per-message latency histogram);
//   - client loop: the producer loop of rocketmq-client-go's benchmark tool
//     (benchmark/producer.go), reproduced with -threads goroutines on one
//     producer and stopped after -messages. The tool itself cannot run this
//     comparison: its message builder stops at 1000 bytes, and with -i above 1
//     all its producers share one client instance, where only the first can
//     start while the others spin on "producer not running";
//   - client tool: the tool binary, built from the module cache, run as it can
//     be (-i 1, -s up to 1000) for -tool-seconds, next to the loop with the
//     same settings as a check that the reproduction is faithful.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/planrun/planrun/drivers/rocketmq"
	embedded "github.com/planrun/planrun/embedded/rocketmq"
	"github.com/planrun/planrun/units"
	"github.com/planrun/planrun/workloads"
)

const (
	toolPackage = "github.com/apache/rocketmq-client-go/v2/benchmark"
	// The tool's message builder slices a 1000-character text.
	toolMaxSize = 1000
	accessKey   = "bench"
	secretKey   = "bench-secret"
)

type options struct {
	messages    int64
	threads     int
	size        int
	queues      int
	acl         bool
	rounds      int
	toolSeconds int
	cpuProfile  string
}

// result is what a child prints on its last line.
type result struct {
	Acked   int64   `json:"acked"`
	Failed  int64   `json:"failed"`
	Seconds float64 `json:"seconds"`
}

func main() {
	var o options
	flag.Int64Var(&o.messages, "messages", 200000, "messages each producer sends")
	flag.IntVar(&o.threads, "threads", 128, "sending threads (goroutines), like producer.sh -w")
	flag.IntVar(&o.size, "size", 1024, "message body size in bytes, like producer.sh -s")
	flag.IntVar(&o.queues, "queues", 8, "queues of the benchmark topics")
	flag.BoolVar(&o.acl, "acl", false, "turn ACL on in the broker and sign every request")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write CPU profiles of the children to this path plus .planrun and .loop")
	flag.IntVar(&o.rounds, "rounds", 1, "times to measure planrun and the client loop, alternating which goes first")
	flag.IntVar(&o.toolSeconds, "tool-seconds", 15, "run the client's own tool this long as a check (0: skip; it prints nothing before 10 s)")
	serve := flag.Bool("serve", false, "only run the embedded broker and print its name server address, until interrupted (to try the client's tool by hand)")
	child := flag.String("child", "", "internal: run one producer (planrun or loop) in this process")
	ns := flag.String("ns", "", "internal: name server address for -child")
	topic := flag.String("topic", "", "internal: topic for -child")
	flag.Parse()

	if *child != "" {
		if err := runChild(*child, *ns, *topic, o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if *serve {
		if err := serveBroker(o); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func startBroker(o options) (*embedded.Broker, error) {
	eo := embedded.Options{DefaultQueues: o.queues}
	if o.acl {
		eo.AccessKey, eo.SecretKey = accessKey, secretKey
	}
	return embedded.Start(context.Background(), eo)
}

func serveBroker(o options) error {
	b, err := startBroker(o)
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Println(b.NameServerAddr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}

type row struct {
	name, settings string
	acked, failed  int64
	wall, cpu      float64 // seconds
	brokerCPU      float64
}

func run(o options) error {
	b, err := startBroker(o)
	if err != nil {
		return err
	}
	defer b.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("embedded broker %s (name server %s), %d CPUs, %s, acl %v\n\n", b.BrokerAddr(), b.NameServerAddr(), runtime.NumCPU(), runtime.Version(), o.acl)

	var rows []row
	settings := fmt.Sprintf("%d B, %d threads", o.size, o.threads)
	pair := []struct{ name, child string }{{"planrun (rocketmq driver)", "planrun"}, {"client benchmark loop", "loop"}}
	for round := range o.rounds {
		for i := range pair {
			// Alternate who goes first: the shared machine drifts.
			c := pair[(i+round)%len(pair)]
			topic := fmt.Sprintf("bench-%s-%d", c.child, round)
			if err := b.CreateTopic(topic, o.queues); err != nil {
				return err
			}
			r, err := measure(exec.Command(self, childArgs(c.child, b.NameServerAddr(), topic, o)...))
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			r.name, r.settings = c.name, settings
			rows = append(rows, r)
		}
	}

	if o.toolSeconds > 0 && o.acl {
		fmt.Fprintln(os.Stderr, "bench: skipping the client's tool: it has no ACL flags")
	}
	if o.toolSeconds > 0 && !o.acl {
		tool, err := buildTool()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: skipping the client's tool: %v\n", err)
		} else {
			size := min(o.size, toolMaxSize)
			check := o
			check.threads, check.size = 1, size
			topic := "bench-tool"
			if err := b.CreateTopic(topic, o.queues); err != nil {
				return err
			}
			r, err := measureTool(b, tool, topic, size, o.toolSeconds)
			if err != nil {
				return fmt.Errorf("client tool: %w", err)
			}
			r.name, r.settings = "client tool (binary)", fmt.Sprintf("%d B, -i 1", size)
			rows = append(rows, r)
			check.messages = max(r.acked, 1000)
			topic = "bench-loop-check"
			if err := b.CreateTopic(topic, o.queues); err != nil {
				return err
			}
			r, err = measure(exec.Command(self, childArgs("loop", b.NameServerAddr(), topic, check)...))
			if err != nil {
				return fmt.Errorf("client loop check: %w", err)
			}
			r.name, r.settings = "client benchmark loop", fmt.Sprintf("%d B, 1 thread", size)
			rows = append(rows, r)
		}
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "producer\tsettings\tacked\tfailed\twall s\tmsg/s\tclient CPU s\tclient CPU s / M msgs\tbroker CPU s / M msgs\t")
	for _, r := range rows {
		perM := func(cpu float64) string {
			if r.acked == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", cpu/float64(r.acked)*1e6)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%.0f\t%.2f\t%s\t%s\t\n", r.name, r.settings, r.acked, r.failed, r.wall,
			float64(r.acked)/r.wall, r.cpu, perM(r.cpu), perM(r.brokerCPU))
	}
	return tw.Flush()
}

func childArgs(kind, ns, topic string, o options) []string {
	args := []string{"-child", kind, "-ns", ns, "-topic", topic,
		"-messages", strconv.FormatInt(o.messages, 10), "-threads", strconv.Itoa(o.threads), "-size", strconv.Itoa(o.size)}
	if o.acl {
		args = append(args, "-acl")
	}
	if o.cpuProfile != "" {
		args = append(args, "-cpuprofile", o.cpuProfile)
	}
	return args
}

// measure runs a child producer and reads its CPU time and its result line.
func measure(cmd *exec.Cmd) (row, error) {
	var logs bytes.Buffer
	cmd.Stderr = &logs
	// The tool logs at the client's default level (info); planrun silences
	// the client unless this variable is set.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ROCKETMQ_GO_LOG_LEVEL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if slices.Contains(cmd.Args, "loop") {
		cmd.Env = append(cmd.Env, "ROCKETMQ_GO_LOG_LEVEL=info")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return row{}, err
	}
	before := selfCPU()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return row{}, err
	}
	var last string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		last = sc.Text()
	}
	if err := cmd.Wait(); err != nil {
		return row{}, fmt.Errorf("%w\n%s", err, logs.Bytes())
	}
	wall := time.Since(start).Seconds()
	var res result
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		return row{}, fmt.Errorf("child printed %q: %w", last, err)
	}
	st := cmd.ProcessState
	return row{acked: res.Acked, failed: res.Failed, wall: wall,
		cpu: (st.UserTime() + st.SystemTime()).Seconds(), brokerCPU: selfCPU() - before}, nil
}

// selfCPU is this process's CPU time so far (the broker's, mostly).
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// buildTool builds the client's benchmark command from the module cache.
func buildTool() (string, error) {
	dir, err := os.MkdirTemp("", "rmq-client-bench-*")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "benchmark")
	cmd := exec.Command("go", "build", "-o", bin, toolPackage)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w", toolPackage, err)
	}
	return bin, nil
}

// snapshotTotal finds the tool's total of acknowledged sends in its log.
var snapshotTotal = regexp.MustCompile(`Benchmark Producer Snapshot.*\btotal=(\d+)`)

// measureTool runs the tool for seconds, stops it with SIGINT as a user
// would, and takes the total from its last statistics line.
func measureTool(b *embedded.Broker, bin, topic string, size, seconds int) (row, error) {
	cmd := exec.Command(bin, "producer", "-n", b.NameServerAddr(), "-t", topic, "-g", "bench", "-i", "1", "-m", "60", "-s", strconv.Itoa(size))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return row{}, err
	}
	before := selfCPU()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return row{}, err
	}
	var total int64
	var failed atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if m := snapshotTotal.FindStringSubmatch(line); m != nil {
				total, _ = strconv.ParseInt(m[1], 10, 64)
			}
			if strings.Contains(line, "Send Message Error") {
				failed.Add(1)
			}
		}
	}()
	timer := time.AfterFunc(time.Duration(seconds)*time.Second, func() { _ = cmd.Process.Signal(os.Interrupt) })
	defer timer.Stop()
	<-done
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return row{}, err
		}
	}
	st := cmd.ProcessState
	return row{acked: total, failed: failed.Load(), wall: time.Since(start).Seconds(),
		cpu: (st.UserTime() + st.SystemTime()).Seconds(), brokerCPU: selfCPU() - before}, nil
}

func runChild(kind, ns, topic string, o options) error {
	if o.cpuProfile != "" {
		f, err := os.Create(fmt.Sprintf("%s.%s", o.cpuProfile, kind))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var res result
	var err error
	start := time.Now()
	switch kind {
	case "planrun":
		res, err = runPlanrun(ns, topic, o)
	case "loop":
		res, err = runLoop(ns, topic, o)
	default:
		err = fmt.Errorf("unknown child %q", kind)
	}
	if err != nil {
		return err
	}
	res.Seconds = time.Since(start).Seconds()
	return json.NewEncoder(os.Stdout).Encode(res)
}

// runPlanrun runs a produce workload over the driver, as a plan's
// "produce: {topic, size, threads, count}" does.
func runPlanrun(ns, topic string, o options) (result, error) {
	ctx := context.Background()
	cfg := &rocketmq.TargetConfig{NameServers: ns}
	if o.acl {
		cfg.AccessKey, cfg.SecretKey = accessKey, secretKey
	}
	tg, err := rocketmq.Driver.Open(ctx, cfg)
	if err != nil {
		return result{}, err
	}
	defer tg.Close()
	var failure error
	var mu sync.Mutex
	env := &workloads.Shared{Run: 1, Start: time.Now(), Fail: func(err error) { mu.Lock(); failure = err; mu.Unlock() }, Warn: func(string) {}}
	env.Acct = workloads.NewAccounting(env.Run)
	spec := workloads.ProduceSpec{Topic: topic, Size: units.Size(o.size), Threads: o.threads, Count: o.messages}
	w := workloads.NewProducer("producer", spec, &rocketmq.ProduceOptions{}, tg, "rocketmq", 0, env)
	if err := w.Start(ctx); err != nil {
		return result{}, err
	}
	for w.Running() {
		time.Sleep(50 * time.Millisecond)
	}
	if err := w.Stop(ctx); err != nil {
		return result{}, err
	}
	c := w.Recorder().Counters()
	mu.Lock()
	defer mu.Unlock()
	return result{Acked: c.Acked, Failed: c.Failed}, failure
}

// The statistics of benchmark/producer.go, updated the same way.
type loopStats struct {
	sendRequestSuccessCount     int64
	sendRequestFailedCount      int64
	receiveResponseSuccessCount int64
	receiveResponseFailedCount  int64
	sendMessageSuccessTimeTotal int64
	sendMessageMaxRT            int64
}

// runLoop is benchmark/producer.go's produceMsg loop on one producer with
// o.threads goroutines, ending after o.messages sends, with the tool's
// once-a-second snapshot of its counters.
func runLoop(ns, topic string, o options) (result, error) {
	opts := []producer.Option{producer.WithNameServer([]string{ns}), producer.WithRetry(2)}
	if o.acl {
		opts = append(opts, producer.WithCredentials(primitive.Credentials{AccessKey: accessKey, SecretKey: secretKey}))
	}
	p, err := rmq.NewProducer(opts...)
	if err != nil {
		return result{}, err
	}
	if err := p.Start(); err != nil {
		return result{}, err
	}
	defer p.Shutdown()
	msgStr := strings.Repeat("0123456789", (o.size+9)/10)[:o.size]

	var stati loopStats
	stop := make(chan struct{})
	var snaps sync.WaitGroup
	snaps.Add(1)
	go func() {
		defer snaps.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var snapshot loopStats
		for {
			select {
			case <-t.C:
				snapshot = loopStats{
					sendRequestSuccessCount:     atomic.LoadInt64(&stati.sendRequestSuccessCount),
					sendRequestFailedCount:      atomic.LoadInt64(&stati.sendRequestFailedCount),
					receiveResponseSuccessCount: atomic.LoadInt64(&stati.receiveResponseSuccessCount),
					receiveResponseFailedCount:  atomic.LoadInt64(&stati.receiveResponseFailedCount),
					sendMessageSuccessTimeTotal: atomic.LoadInt64(&stati.sendMessageSuccessTimeTotal),
					sendMessageMaxRT:            atomic.LoadInt64(&stati.sendMessageMaxRT),
				}
				_ = snapshot
			case <-stop:
				return
			}
		}
	}()

	// The first send resolves the route alone: concurrent first sends of
	// this client fail while it records the broker's address.
	if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(msgStr))); err != nil {
		return result{}, err
	}
	remaining := o.messages - 1
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range o.threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for atomic.AddInt64(&remaining, -1) >= 0 {
			again:
				now := time.Now()
				r, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(msgStr)))
				if err != nil {
					failed.Add(1)
					goto again
				}
				if r.Status == primitive.SendOK {
					atomic.AddInt64(&stati.receiveResponseSuccessCount, 1)
					atomic.AddInt64(&stati.sendRequestSuccessCount, 1)
					currentRT := int64(time.Since(now) / time.Millisecond)
					atomic.AddInt64(&stati.sendMessageSuccessTimeTotal, currentRT)
					prevRT := atomic.LoadInt64(&stati.sendMessageMaxRT)
					for currentRT > prevRT {
						if atomic.CompareAndSwapInt64(&stati.sendMessageMaxRT, prevRT, currentRT) {
							break
						}
						prevRT = atomic.LoadInt64(&stati.sendMessageMaxRT)
					}
					continue
				}
				failed.Add(1)
				goto again
			}
		}()
	}
	wg.Wait()
	close(stop)
	snaps.Wait()
	return result{Acked: atomic.LoadInt64(&stati.receiveResponseSuccessCount) + 1, Failed: failed.Load()}, nil
}
