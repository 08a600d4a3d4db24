package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/planrun/planrun/engine/enginetest"
)

// propertyPlan is a random plan on the memory driver: random faults,
// rates, threads and sizes, and a random sequence of phases, starts, stops,
// restarts and sleeps over a few seconds at most.
func propertyPlan(rng *rand.Rand, name string) string {
	every := func() int {
		if rng.IntN(2) == 0 {
			return 0
		}
		return 3 + rng.IntN(40)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\ntargets:\n  mq: { driver: memory, partitions: %d, fail_every: %d, drop_every: %d, duplicate_every: %d, reorder_every: %d }\nworkloads:\n",
		name, 1+rng.IntN(4), every(), every(), every(), every())
	var names []string
	producers := 1 + rng.IntN(2)
	for i := range producers {
		n := fmt.Sprintf("producer%d", i)
		names = append(names, n)
		fmt.Fprintf(&b, "  %s: { produce: { topic: t, size: %dB, threads: %d, rate: %d } }\n", n, 22+rng.IntN(200), 1+rng.IntN(3), 100+rng.IntN(1500))
	}
	// The memory broker gives every consumer of a group every partition:
	// one consumer per group.
	for i := range 1 + rng.IntN(2) {
		n := fmt.Sprintf("consumer%d", i)
		names = append(names, n)
		fmt.Fprintf(&b, "  %s: { consume: { topic: t, group: g%d } }\n", n, i)
	}
	b.WriteString("progress: 0s\nsteps:\n  - start: all\n    phase: p0\n")
	budget := 1500 // milliseconds of sleeps
	for i := 1; budget > 0; i++ {
		phase := ""
		if rng.IntN(3) > 0 {
			phase = fmt.Sprintf("\n    phase: p%d", i)
		}
		switch w := names[rng.IntN(len(names))]; rng.IntN(6) {
		case 0:
			fmt.Fprintf(&b, "  - stop: %s%s\n", w, phase)
		case 1:
			fmt.Fprintf(&b, "  - start: %s%s\n", w, phase)
		case 2:
			fmt.Fprintf(&b, "  - restart: %s\n    pause: %dms%s\n", w, rng.IntN(100), phase)
			budget -= 100
		default:
			ms := 10 + rng.IntN(300)
			budget -= ms
			fmt.Fprintf(&b, "  - sleep: %dms%s\n", ms, phase)
		}
	}
	if rng.IntN(2) == 0 {
		b.WriteString("  - stop: all\n")
	}
	return b.String()
}

// envInt reads a positive integer from the environment, or def.
func envInt(name string, def int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil && v > 0 {
		return v
	}
	return def
}

// Random plans on the memory driver, in one process and over two local
// workers, each checked against every invariant of results.Check. A few
// cases by default; PLANRUN_PROPERTY_CASES=N runs more and
// PLANRUN_PROPERTY_SEED=S repeats a failing run.
func TestRandomPlansHoldEveryInvariant(t *testing.T) {
	if testing.Short() {
		t.Skip("runs plans for a few seconds each")
	}
	seed := envInt("PLANRUN_PROPERTY_SEED", time.Now().UnixNano())
	cases := envInt("PLANRUN_PROPERTY_CASES", 4)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d: repeat with PLANRUN_PROPERTY_SEED=%d PLANRUN_PROPERTY_CASES=%d", seed, seed, cases)
		}
	})
	addrs, _ := startWorkers(t, 2)
	for i := range cases {
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
		name := fmt.Sprintf("random%d", i)
		plan := propertyPlan(rng, name)
		workers := i%2 == 1
		t.Run(fmt.Sprintf("%s workers=%v", name, workers), func(t *testing.T) {
			t.Logf("seed %d, case %d:\n%s", seed, i, plan)
			if !workers {
				enginetest.Execute(t, plan)
				return
			}
			dir := t.TempDir()
			var out strings.Builder
			code := run([]string{"run", "--quiet", "--workers", strings.Join(addrs, ","), "--token", "t0k", "--out", dir, writePlan(t, plan)}, &out, &out)
			if code != exitOK {
				t.Fatalf("exit %d\n%s", code, out.String())
			}
			loadResult(t, dir, name) // checks every invariant
		})
	}
}
