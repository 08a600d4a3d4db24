package steps_test

import (
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/planrun/planrun/engine/enginetest"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/results"
)

// execute runs a whole plan with the memory driver.
func execute(t *testing.T, y string) *results.Result {
	t.Helper()
	return enginetest.Execute(t, y)
}

// A producer follows a ramp, a hold and then a rate a set step gives it
// without restarting: every whole second after the first of a stage sends
// within 2% of what the schedule asks for, and latency measured from the
// intended send times stays flat across the change.
func TestRateScheduleAndSet(t *testing.T) {
	y := `name: schedule
targets:
  mq: { driver: memory }
workloads:
  producer:
    produce: { topic: a, size: 100B, threads: 4, rate: [{to: 2000, over: 4s}, {hold: 3s}] }
progress: 0s
steps:
  - start: producer
    phase: ramp
  - sleep: 7s
  - set: {producer.rate: 1000}
    phase: set
  - sleep: 4s
  - stop: all
`
	run := execute(t, y).Runs[0]
	var t0, t1 float64
	for _, ph := range run.Metrics.Phases {
		switch ph.Name {
		case "ramp":
			t0 = ph.Start
		case "set":
			t1 = ph.Start
		}
	}
	if t1 <= t0 {
		t.Fatalf("phases %v", run.Metrics.PhaseNames())
	}
	// Messages the schedule asks for by t seconds into the run.
	want := func(t float64) float64 {
		s := t - t0
		switch {
		case s <= 0:
			return 0
		case t > t1:
			return 2000*2 + 2000*(t1-t0-4) + 1000*(t-t1)
		case s <= 4:
			return 500 * s * s / 2
		default:
			return 2000*2 + 2000*(s-4)
		}
	}
	// Stages as run: the ramp, the hold, the set rate.
	stages := [][2]float64{{t0, t0 + 4}, {t0 + 4, t1}, {t1, t1 + 4}}
	checked := 0
	var p99s, around []float64
	var sent int64 // sent by the end of the point, from the series' counts
	for _, p := range run.Metrics.Series["producer"] {
		sent += p.Sent
		if p.Interval == 0 {
			continue
		}
		p99s = append(p99s, p.P99)
		from, to := p.T-p.Interval, p.T
		for _, st := range stages {
			if from < st[0]+1 || to > st[1] {
				continue
			}
			// The pacer never sends ahead of the schedule, and falls no
			// more than a second's sends behind it (a schedule that lost
			// its place would); how a busy machine spreads the sends
			// over neighbouring seconds is not asserted.
			rate := (want(to) - want(from)) / p.Interval
			if ahead := float64(sent) - want(to); ahead > 0.01*want(to)+2 {
				t.Errorf("by %.2fs: sent %d, %.0f ahead of the schedule", to, sent, ahead)
			} else if -ahead > rate {
				t.Errorf("by %.2fs: sent %d, %.0f behind the schedule (%.0f msg/s)", to, sent, -ahead, rate)
			}
			checked++
		}
		// Around the change the latency from intended send time stays low:
		// a schedule that lost its place would show seconds here (a busy
		// machine shows tens of milliseconds anywhere).
		if to > t1-1 && from < t1+2 {
			around = append(around, p.P99)
			if p.P99 > 250 {
				t.Errorf("second ending at %.2fs, by the change at %.2fs: p99 %.1f ms from intended send time", to, t1, p.P99)
			}
		}
	}
	if len(around) < 2 {
		t.Errorf("only %d seconds around the change", len(around))
	}
	t.Logf("per-second p99 around the change: %v ms", around)
	if checked < 4 {
		t.Errorf("only %d whole seconds inside stages were checked", checked)
	}
	sort.Float64s(p99s)
	t.Logf("checked %d seconds; per-second p99 median %.3f ms, max %.3f ms", checked, p99s[len(p99s)/2], p99s[len(p99s)-1])
	prod := run.Metrics.Workloads["producer"]
	if total := want(t1 + 4); math.Abs(float64(prod.Acked)-total) > 0.03*total {
		t.Errorf("acked %d in all, schedule asks about %.0f", prod.Acked, total)
	}
}

// Mistakes in schedules and set steps are caught when the plan loads.
func TestRateScheduleMistakes(t *testing.T) {
	head := `name: bad
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, rate: RATE } }
  consumer: { consume: { topic: a } }
steps:
  - start: all
  - set: SET
`
	for _, c := range []struct{ rate, set, want string }{
		{"[{to: 10, hold: 1s}]", "{producer.rate: 5}", "has to: and hold:"},
		{"[{over: 1s}]", "{producer.rate: 5}", "needs to:"},
		{"[]", "{producer.rate: 5}", "at least one stage"},
		{"fast", "{producer.rate: 5}", "list of stages"},
		{"[{to: -1}]", "{producer.rate: 5}", "0 or more"},
		{"10", "{producer.rate: [{hold: 0s}]}", "needs to:"},
		{"10", "{consumer.rate: 5}", "cannot change rate"},
		{"10", "{producr.rate: 5}", "unknown workload \"producr\""},
		{"10", "{producer: 5}", "WORKLOAD.KEY"},
		{"10", "{producer.size: 5}", "it can change: rate, threads"},
		{"10", "{producer.threads: 0}", "threads must be from 1 to 65535"},
		{"10", "{producer.threads: some}", "want a whole number"},
		{"10", "{producer.rate: lots}", "want a number"},
	} {
		y := strings.NewReplacer("RATE", c.rate, "SET", c.set).Replace(head)
		_, _, err := plan.Parse("plan.yaml", []byte(y), plan.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rate %s, set %s: got %v, want an error with %q", c.rate, c.set, err, c.want)
		}
	}
}

// A set step adds and ends sending threads of a running producer on a
// driver that takes them (memory): with every send taking 20 ms and no rate,
// each thread sends about 50 messages a second, so the achieved rate
// follows the number of threads.
func TestSetThreads(t *testing.T) {
	y := `name: threads
targets:
  mq: { driver: memory, delay: 20ms }
workloads:
  producer: { produce: { topic: a, size: 100B, threads: 2 } }
progress: 0s
steps:
  - start: producer
    phase: two
  - sleep: 3s
  - set: {producer.threads: 8}
    phase: eight
  - sleep: 3s
  - set: {producer.threads: 1}
    phase: one
  - sleep: 3s
  - stop: all
`
	run := execute(t, y).Runs[0]
	rates, perThread := map[string]float64{}, map[string]float64{}
	for _, ph := range run.Metrics.Phases {
		n := map[string]float64{"two": 2, "eight": 8, "one": 1}[ph.Name]
		if n > 0 {
			rates[ph.Name] = ph.Workloads["producer"].Rate
			perThread[ph.Name] = rates[ph.Name] / n
		}
	}
	t.Logf("msg/s per thread: %v", perThread)
	if len(perThread) != 3 {
		t.Fatalf("phases %v", run.Metrics.PhaseNames())
	}
	for name, r := range perThread {
		// At most 50/s a thread (20 ms a send), plus the sends that ended
		// threads had begun before the change (up to two each of the 7
		// threads ended when eight become one: 14 in 3 s, about 5 a
		// second): more means more threads than asked for.
		if r > 60 || r < 15 {
			t.Errorf("phase %s: %.1f msg/s per thread, want at most about 50", name, r)
		}
	}
	// A busy machine slows every thread alike; the rates still follow the
	// number of threads (4x and 1/2 when the machine is quiet).
	if rates["eight"] < 2.5*rates["two"] || rates["one"] > 0.7*rates["two"] {
		t.Errorf("rates %v msg/s at 2, 8 and 1 threads do not follow the threads", rates)
	}
}
