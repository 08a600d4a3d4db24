package collectors

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/planrun/planrun/plan"
)

func TestHostRegistered(t *testing.T) {
	for _, k := range plan.CollectorKinds() {
		if k.Name == "host" {
			if (&Host{}).Figures()[0] != "cpu" || k.New() == nil {
				t.Fatal("host collector misregistered")
			}
			return
		}
	}
	t.Fatal("host collector not registered")
}

// busy keeps a core busy until ctx ends so the CPU figures have something
// to measure.
func busy(ctx context.Context) {
	x := 0
	for ctx.Err() == nil {
		for i := 0; i < 1e5; i++ {
			x += i
		}
	}
	_ = x
}

func sampleTwice(t *testing.T, h *Host) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	s, err := h.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bctx, stop := context.WithCancel(ctx)
	go busy(bctx)
	defer stop()
	// The first sample after Open already has rates once the kernel's CPU
	// counters have moved (they tick every 10ms): poll until they have.
	var vals map[string]float64
	for i := 0; ; i++ {
		time.Sleep(50 * time.Millisecond)
		vals, err = s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := vals["cpu"]; ok {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no cpu figure after repeated samples")
		}
	}
	time.Sleep(200 * time.Millisecond)
	vals, err = s.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func TestHostSamples(t *testing.T) {
	h := &Host{IncludeLoopback: true}
	vals := sampleTwice(t, h)
	for _, f := range h.Figures() {
		if _, ok := vals[f]; !ok {
			t.Errorf("figure %s missing from %v", f, vals)
		}
	}
	for _, f := range []string{"cpu", "cpu_user", "cpu_system", "cpu_idle", "cpu_iowait", "mem"} {
		if v := vals[f]; v < 0 || v > 100 {
			t.Errorf("%s = %v, want 0..100", f, v)
		}
	}
	if vals["cpu"] <= 0 {
		t.Errorf("cpu = %v while a core was kept busy", vals["cpu"])
	}
	if vals["mem"] <= 0 || vals["mem_used_mb"] <= 0 {
		t.Errorf("mem = %v, mem_used_mb = %v, want > 0", vals["mem"], vals["mem_used_mb"])
	}
	for _, f := range []string{"net_in_mbps", "net_out_mbps", "disk_read_mbps", "disk_write_mbps", "load1", "load_per_core"} {
		if vals[f] < 0 {
			t.Errorf("%s = %v, want >= 0", f, vals[f])
		}
	}
	if _, ok := vals["rss_mb"]; ok {
		t.Error("rss_mb without pid")
	}
}

func TestHostProcess(t *testing.T) {
	h := &Host{PID: os.Getpid()}
	if !slices.Contains(h.Figures(), "rss_mb") || !slices.Contains(h.Figures(), "proc_cpu") {
		t.Fatalf("figures with pid: %v", h.Figures())
	}
	vals := sampleTwice(t, h)
	if vals["rss_mb"] <= 0 {
		t.Errorf("rss_mb = %v, want > 0", vals["rss_mb"])
	}
	if v, ok := vals["proc_cpu"]; !ok || v <= 0 {
		t.Errorf("proc_cpu = %v (present %v) while this process keeps a core busy", v, ok)
	}
	if _, ok := vals["cpu"]; !ok {
		t.Error("host figures missing with pid")
	}
}

func TestHostPIDFile(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "broker.pid")
	if err := os.WriteFile(pidfile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vals := sampleTwice(t, &Host{PIDFile: pidfile})
	if vals["rss_mb"] <= 0 {
		t.Errorf("rss_mb = %v, want > 0", vals["rss_mb"])
	}
}

func TestHostErrors(t *testing.T) {
	if err := (&Host{PID: 1, PIDFile: "x"}).Check(); err == nil {
		t.Error("pid and pidfile accepted together")
	}
	ctx := context.Background()
	if _, err := (&Host{Interfaces: []string{"no-such-nic0"}}).Open(ctx); err == nil {
		t.Error("unknown interface accepted")
	}
	if _, err := (&Host{Disks: []string{"no-such-disk"}}).Open(ctx); err == nil {
		t.Error("unknown disk accepted")
	}
	bad := filepath.Join(t.TempDir(), "bad.pid")
	if err := os.WriteFile(bad, []byte("nope"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Host{PIDFile: bad}).Open(ctx); err == nil {
		t.Error("pidfile without a number accepted")
	}
}

func TestDeltas(t *testing.T) {
	t0 := time.Unix(100, 0)
	prev := map[string][2]uint64{"a": {100, 10}, "b": {50, 50}}
	cur := map[string][2]uint64{"a": {300, 30}, "b": {10, 60}, "new": {1e9, 1e9}}
	a, b, dt := deltas(prev, cur, t0, t0.Add(2*time.Second))
	// b's first counter went back (reset): it adds nothing; new adds nothing.
	if a != 200 || b != 30 || dt != 2 {
		t.Errorf("deltas = %v, %v, %v; want 200, 30, 2", a, b, dt)
	}
	if _, _, dt := deltas(nil, cur, t0, t0); dt != 0 {
		t.Errorf("no previous read gave dt %v", dt)
	}
}
