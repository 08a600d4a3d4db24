// Command kafka compares the CPU, memory and pacing of planrun's Kafka
// producer with sarama's own kafka-producer-performance tool, against one
// kfake broker (github.com/twmb/franz-go/pkg/kfake) in a separate process on
// 127.0.0.1, for 1 KiB messages at 5,000 and 50,000 msg/s:
//
//	go install github.com/IBM/sarama/tools/kafka-producer-performance@v1.61.1
//	go run ./bench/kafka                              # 5000 and 50000 msg/s, 20 s each
//	go run ./bench/kafka -rates 5000 -seconds 60 -cpuprofile /tmp/planrun.prof
//	go run ./bench/kafka -linger 0                    # planrun without batching
//	go run ./bench/kafka -serve -port 19092           # only the broker, to try things by hand
//
// Each producer runs in a child process, so its CPU time (user + system,
// from the child's rusage) and its peak RSS are its own. Both send the same
// number of messages (rate x seconds) with acks all to a topic of 8
// partitions. Reported per rate and producer: CPU seconds per million
// acknowledged messages, the achieved rate against the target, p99 latency,
// peak RSS, and the broker's CPU while the producer ran.
//
// The two do not pace alike. planrun spaces sends evenly (message k is due
// at start + k/rate) and measures each message's latency from its due time.
// The sarama tool hands a whole second's messages to its producer at once,
// then waits for the next tick: it sends one burst per second, which batches
// well but is not an even load, and its p99 is that of produce requests, not
// of messages. The tool also builds every message before it starts, so its
// memory grows with the message count.
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
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	_ "github.com/planrun/planrun/drivers/kafka"
	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/results"
	_ "github.com/planrun/planrun/steps"
)

const toolName = "kafka-producer-performance"

type options struct {
	rates      []int
	seconds    int
	size       int
	threads    int
	linger     string
	tool       string
	cpuProfile string
}

// result is what a child reports on its last line of output.
type result struct {
	Acked  int64   `json:"acked"`
	Rate   float64 `json:"rate"`   // achieved msg/s
	P99    float64 `json:"p99_ms"` // ms
	Detail string  `json:"detail,omitempty"`
}

func main() {
	var o options
	serveOnly := flag.Bool("serve", false, "only run the kfake broker (on -port), to try things by hand")
	port := flag.Int("port", 0, "kfake's port with -serve (0: any free port)")
	partitions := flag.Int("partitions", 8, "partitions of the topics")
	rates := flag.String("rates", "5000,50000", "target rates in msg/s, comma-separated")
	flag.IntVar(&o.seconds, "seconds", 20, "seconds of sending per run: each producer sends rate x seconds messages")
	flag.IntVar(&o.size, "size", 1024, "message size in bytes")
	flag.IntVar(&o.threads, "threads", 0, "planrun's sending threads (0: rate/50, at least 16)")
	flag.StringVar(&o.linger, "linger", "", "planrun's kafka linger (empty: the driver's default)")
	flag.StringVar(&o.tool, "tool", "", "path of "+toolName+" (default: $GOBIN, $GOPATH/bin or $PATH)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write planrun's CPU profile to this file (suffixed with the rate)")
	child := flag.String("child", "", "internal: run planrun's producer in this process against the broker at -brokers")
	brokers := flag.String("brokers", "", "internal: the broker of a child")
	topic := flag.String("topic", "", "internal: the topic of a child")
	rate := flag.Int("rate", 0, "internal: the rate of a child")
	flag.Parse()
	var err error
	switch {
	case *serveOnly:
		err = serve(*port, *partitions)
	case *child != "":
		err = runChild(*brokers, *topic, *rate, o)
	default:
		for _, f := range strings.Split(*rates, ",") {
			r, perr := strconv.Atoi(strings.TrimSpace(f))
			if perr != nil || r <= 0 {
				fmt.Fprintf(os.Stderr, "-rates: %q is not a positive number\n", f)
				os.Exit(2)
			}
			o.rates = append(o.rates, r)
		}
		err = run(o, *partitions)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/kafka:", err)
		os.Exit(1)
	}
}

// row is one producer's figures at one rate.
type row struct {
	name      string
	rate      int
	res       result
	cpu       float64 // seconds, user + system
	rssMiB    float64 // peak
	brokerCPU float64
}

func run(o options, partitions int) error {
	tool, err := findTool(o.tool)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	broker := exec.Command(self, "-serve", "-partitions", strconv.Itoa(partitions))
	broker.Stderr = os.Stderr
	out, err := broker.StdoutPipe()
	if err != nil {
		return err
	}
	if err := broker.Start(); err != nil {
		return fmt.Errorf("starting kfake: %w", err)
	}
	defer func() {
		_ = broker.Process.Signal(os.Interrupt)
		_ = broker.Wait()
	}()
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading kfake's address: %w", err)
	}
	addr = strings.TrimSpace(addr)
	fmt.Printf("kfake at %s (pid %d), %d B messages, %d s per run, acks all, %d partitions\n", addr, broker.Process.Pid, o.size, o.seconds, partitions)

	var rows []row
	for _, r := range o.rates {
		n := r * o.seconds
		args := []string{"-child", "planrun", "-brokers", addr, "-topic", fmt.Sprintf("planrun-%d", r), "-rate", strconv.Itoa(r),
			"-seconds", strconv.Itoa(o.seconds), "-size", strconv.Itoa(o.size), "-threads", strconv.Itoa(o.threads)}
		if o.linger != "" {
			args = append(args, "-linger", o.linger)
		}
		if o.cpuProfile != "" {
			args = append(args, "-cpuprofile", fmt.Sprintf("%s.%d", o.cpuProfile, r))
		}
		pr, err := measure(exec.Command(self, args...), broker.Process.Pid, parseChild)
		if err != nil {
			return fmt.Errorf("planrun at %d msg/s: %w", r, err)
		}
		pr.name, pr.rate = "planrun", r
		rows = append(rows, pr)
		tr, err := measure(exec.Command(tool, "-brokers", addr, "-topic", fmt.Sprintf("tool-%d", r), "-message-load", strconv.Itoa(n),
			"-message-size", strconv.Itoa(o.size), "-throughput", strconv.Itoa(r), "-required-acks", "-1", "-version", "2.8.0"),
			broker.Process.Pid, parseTool)
		if err != nil {
			return fmt.Errorf("%s at %d msg/s: %w", toolName, r, err)
		}
		tr.name, tr.rate = toolName+" (bursty)", r
		tr.res.Acked = int64(n)
		rows = append(rows, tr)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "producer\ttarget msg/s\tachieved msg/s\tvs target\tCPU-s per 1M msgs\tp99 ms\tpeak RSS MiB\tbroker CPU-s per 1M\t")
	for _, r := range rows {
		per := 1e6 / float64(max(r.res.Acked, 1))
		fmt.Fprintf(w, "%s\t%d\t%.1f\t%+.2f%%\t%.2f\t%.2f\t%.1f\t%.2f\t\n", r.name, r.rate, r.res.Rate, 100*(r.res.Rate-float64(r.rate))/float64(r.rate),
			r.cpu*per, r.res.P99, r.rssMiB, r.brokerCPU*per)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for i := 0; i+1 < len(rows); i += 2 {
		p, t := rows[i], rows[i+1]
		fmt.Printf("at %d msg/s planrun uses %.2fx the CPU per message of %s\n", p.rate,
			(p.cpu/float64(p.res.Acked))/(t.cpu/float64(t.res.Acked)), toolName)
	}
	fmt.Println("planrun: rate = acked / first-to-last ack, p99 = per message from its due time (even pacing).")
	fmt.Println(toolName + ": rate = its record-send-rate mean, p99 = of produce requests; it sends one burst per second.")
	return nil
}

// measure runs cmd to its end and returns its CPU time, peak RSS and the
// broker's CPU meanwhile, with what parse makes of its output.
func measure(cmd *exec.Cmd, brokerPid int, parse func([]byte) (result, error)) (row, error) {
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	before, err := procCPU(brokerPid)
	if err != nil {
		return row{}, err
	}
	if err := cmd.Run(); err != nil {
		return row{}, fmt.Errorf("%v: %w\n%s", cmd.Args, err, out.Bytes())
	}
	after, err := procCPU(brokerPid)
	if err != nil {
		return row{}, err
	}
	res, err := parse(out.Bytes())
	if err != nil {
		return row{}, err
	}
	st := cmd.ProcessState
	ru := st.SysUsage().(*syscall.Rusage)
	return row{res: res, cpu: (st.UserTime() + st.SystemTime()).Seconds(), rssMiB: float64(ru.Maxrss) * 1024 / (1 << 20),
		brokerCPU: after - before}, nil
}

// procCPU is a process's user + system CPU seconds so far.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses.
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

var toolLine = regexp.MustCompile(`(\d+) records sent, ([\d.]+) records/sec .* ([\d.]+) ms 99th`)

func parseTool(out []byte) (result, error) {
	m := toolLine.FindAllSubmatch(out, -1)
	if m == nil {
		return result{}, fmt.Errorf("no figures in %s's output:\n%s", toolName, out)
	}
	last := m[len(m)-1]
	rate, _ := strconv.ParseFloat(string(last[2]), 64)
	p99, _ := strconv.ParseFloat(string(last[3]), 64)
	return result{Rate: rate, P99: p99}, nil
}

func findTool(path string) (string, error) {
	if path != "" {
		return path, nil
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
	for _, d := range dirs {
		if p := filepath.Join(d, toolName); fileExists(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(toolName); err == nil {
		return p, nil
	}
	return "", errors.New(toolName + " not found: go install github.com/IBM/sarama/tools/kafka-producer-performance@v1.61.1, or give -tool")
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// runChild runs planrun's produce workload as a plan does, through the
// engine, and prints its figures as JSON.
func runChild(brokers, topic string, rate int, o options) error {
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	threads := o.threads
	if threads <= 0 {
		threads = max(16, rate/50)
	}
	linger := ""
	if o.linger != "" {
		linger = ", linger: " + o.linger
	}
	y := fmt.Sprintf(`name: bench-kafka
targets:
  kafka: { driver: kafka, brokers: "%s", topics: { %s: { partitions: 8 } } }
workloads:
  producer: { produce: { topic: %s, size: %dB, rate: %d, count: %d, threads: %d, acks: all%s } }
progress: 0s
steps:
  - start: producer
  - wait: "!producer.running"
    poll: 1h
    timeout: 1h
  - assert: producer.acked == %d
`, brokers, topic, topic, o.size, rate, rate*o.seconds, threads, linger, rate*o.seconds)
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
