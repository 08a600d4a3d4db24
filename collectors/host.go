// Package collectors provides the plan collectors: figures of this machine
// (and of one process on it) and figures scraped from a Prometheus endpoint.
// Importing it registers them with the plan.
package collectors

import (
	"context"
	"errors"
	"fmt"
	stdnet "net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/disk"
	"github.com/shirou/gopsutil/v4/load"
	"github.com/shirou/gopsutil/v4/mem"
	"github.com/shirou/gopsutil/v4/net"
	"github.com/shirou/gopsutil/v4/process"

	"github.com/planrun/planrun/plan"
)

func init() {
	plan.RegisterCollector(plan.CollectorKind{Name: "host", Doc: hostDoc(), New: func() plan.CollectorConfig { return &Host{} }})
}

// hostFigures are the machine-wide figures, in the order Figures lists them.
var hostFigures = []struct{ name, doc string }{
	{"cpu", "% of all cores busy (0-100; iowait counts as idle)"},
	{"cpu_user", "% of all cores in user code (nice included)"},
	{"cpu_system", "% of all cores in the kernel (interrupts included)"},
	{"cpu_iowait", "% of all cores idle while waiting for disk I/O"},
	{"cpu_idle", "% of all cores idle"},
	{"load1", "1-minute load average"},
	{"load_per_core", "load1 divided by the number of logical cores"},
	{"mem", "% of memory used"},
	{"mem_used_mb", "memory used, MB (10^6 bytes)"},
	{"net_in_mbps", "bytes received on the counted interfaces, MB/s"},
	{"net_out_mbps", "bytes sent on the counted interfaces, MB/s"},
	{"disk_read_mbps", "bytes read from the counted disks, MB/s"},
	{"disk_write_mbps", "bytes written to the counted disks, MB/s"},
}

// procFigures are added when a process is watched.
var procFigures = []struct{ name, doc string }{
	{"proc_cpu", "the process's CPU, % of one core like top (200 = two cores busy)"},
	{"rss_mb", "the process's resident memory, MB (10^6 bytes)"},
}

func hostDoc() string {
	var b strings.Builder
	b.WriteString("this machine's CPU, load, memory, network and disk, and with pid or pidfile one process's CPU and memory; figures: ")
	for i, f := range append(slices.Clone(hostFigures), procFigures...) {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s)", f.name, f.doc)
	}
	return b.String()
}

// Host is the host collector's configuration.
type Host struct {
	PID             int      `yaml:"pid" doc:"also measure this process (proc_cpu, rss_mb)"`
	PIDFile         string   `yaml:"pidfile" doc:"also measure the process whose id this file holds; the file is read again when that process is gone, so a restarted broker is followed"`
	Interfaces      []string `yaml:"interfaces" default:"all except loopback" doc:"network interfaces summed into net_in_mbps and net_out_mbps"`
	IncludeLoopback bool     `yaml:"include_loopback" doc:"without interfaces, count loopback too: an embedded broker and its clients on one machine only talk over loopback"`
	Disks           []string `yaml:"disks" default:"every whole disk" doc:"block devices summed into disk_read_mbps and disk_write_mbps (by default no partitions, loop or device-mapper devices)"`
}

// Check rejects settings that cannot work on any machine.
func (h *Host) Check() error {
	if h.PID != 0 && h.PIDFile != "" {
		return errors.New("give pid or pidfile, not both")
	}
	if h.PID < 0 {
		return fmt.Errorf("pid must be positive, got %d", h.PID)
	}
	return nil
}

// Figures lists the host figures, plus the process ones with pid or pidfile.
func (h *Host) Figures() []string {
	var names []string
	for _, f := range hostFigures {
		names = append(names, f.name)
	}
	if h.watchesProcess() {
		for _, f := range procFigures {
			names = append(names, f.name)
		}
	}
	return names
}

func (h *Host) watchesProcess() bool { return h.PID != 0 || h.PIDFile != "" }

// Open checks the named interfaces, disks and process exist and reads the
// counters once, so that the first sample already has rates.
func (h *Host) Open(ctx context.Context) (plan.Sampler, error) {
	s := &hostSampler{cfg: h, cores: runtime.NumCPU()}
	if n, err := cpu.CountsWithContext(ctx, true); err == nil && n > 0 {
		s.cores = n
	}
	if err := s.pickInterfaces(ctx); err != nil {
		return nil, err
	}
	if err := s.pickDisks(ctx); err != nil {
		return nil, err
	}
	if h.watchesProcess() {
		if err := s.findProcess(ctx); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Errors here only cost the first sample its rates.
	_, _ = s.sampleLocked(ctx)
	return s, nil
}

type hostSampler struct {
	cfg   *Host
	cores int

	mu        sync.Mutex
	loopback  map[string]bool // interfaces left out when none are named
	ifaces    []string        // the named interfaces, if given
	disks     map[string]bool // whole disks when none are named
	diskNames []string        // the named disks, if given

	cpuPrev  *cpu.TimesStat
	netPrev  map[string][2]uint64 // recv, sent
	netAt    time.Time
	diskPrev map[string][2]uint64 // read, written
	diskAt   time.Time

	pid      int32
	proc     *process.Process
	procPrev float64 // user+system seconds
	procAt   time.Time
	// goneReported is set once the process's end has been reported.
	goneReported bool
}

func (s *hostSampler) pickInterfaces(ctx context.Context) error {
	if len(s.cfg.Interfaces) > 0 {
		counters, err := net.IOCountersWithContext(ctx, true)
		if err != nil {
			return fmt.Errorf("reading network counters: %w", err)
		}
		var known []string
		for _, c := range counters {
			known = append(known, c.Name)
		}
		for _, want := range s.cfg.Interfaces {
			if !slices.Contains(known, want) {
				return fmt.Errorf("no network interface %q on this machine; it has %s", want, strings.Join(known, ", "))
			}
		}
		s.ifaces = s.cfg.Interfaces
		return nil
	}
	s.loopback = map[string]bool{}
	if s.cfg.IncludeLoopback {
		return nil
	}
	ifs, err := stdnet.Interfaces()
	if err != nil {
		// Without flags, fall back to the usual loopback names.
		s.loopback["lo"], s.loopback["lo0"] = true, true
		return nil
	}
	for _, i := range ifs {
		if i.Flags&stdnet.FlagLoopback != 0 {
			s.loopback[i.Name] = true
		}
	}
	return nil
}

// pickDisks settles which devices count: summing partitions with their
// disk, or device-mapper volumes with the disks under them, would count
// the same bytes twice.
func (s *hostSampler) pickDisks(ctx context.Context) error {
	if len(s.cfg.Disks) > 0 {
		counters, err := disk.IOCountersWithContext(ctx)
		if err != nil {
			return fmt.Errorf("reading disk counters: %w", err)
		}
		for _, want := range s.cfg.Disks {
			name := strings.TrimPrefix(want, "/dev/")
			if _, ok := counters[name]; !ok {
				known := make([]string, 0, len(counters))
				for k := range counters {
					known = append(known, k)
				}
				slices.Sort(known)
				return fmt.Errorf("no disk %q with I/O counters on this machine; it has %s", want, strings.Join(known, ", "))
			}
			s.diskNames = append(s.diskNames, name)
		}
		return nil
	}
	entries, err := os.ReadDir("/sys/block")
	if err != nil {
		// Not Linux: the counters already list whole disks only.
		return nil
	}
	s.disks = map[string]bool{}
	for _, e := range entries {
		n := e.Name()
		if virtualDisk(n) {
			continue
		}
		s.disks[n] = true
	}
	return nil
}

func virtualDisk(name string) bool {
	for _, p := range []string{"loop", "ram", "zram", "dm-", "md", "fd", "sr", "nbd"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func (s *hostSampler) findProcess(ctx context.Context) error {
	pid := int32(s.cfg.PID)
	if s.cfg.PIDFile != "" {
		p, err := readPIDFile(s.cfg.PIDFile)
		if err != nil {
			return err
		}
		pid = p
	}
	p, err := process.NewProcessWithContext(ctx, pid)
	if err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	s.pid, s.proc, s.procAt = pid, p, time.Time{}
	return nil
}

func readPIDFile(path string) (int32, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("pidfile: %w", err)
	}
	pid, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 32)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pidfile %s does not hold a process id: %q", path, strings.TrimSpace(string(data)))
	}
	return int32(pid), nil
}

func (s *hostSampler) Sample(ctx context.Context) (map[string]float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sampleLocked(ctx)
}

func (s *hostSampler) Close() error { return nil }

// sampleLocked reads every source; a failing source leaves its figures
// out, and the first error is returned with what could be read.
func (s *hostSampler) sampleLocked(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	var errs []error
	for _, read := range []func(context.Context, map[string]float64) error{s.readCPU, s.readLoad, s.readMem, s.readNet, s.readDisk} {
		if err := read(ctx, out); err != nil {
			errs = append(errs, err)
		}
	}
	if s.cfg.watchesProcess() {
		if err := s.readProcess(ctx, out); err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

func (s *hostSampler) readCPU(ctx context.Context, out map[string]float64) error {
	times, err := cpu.TimesWithContext(ctx, false)
	if err != nil || len(times) == 0 {
		return fmt.Errorf("reading CPU times: %w", orNoData(err))
	}
	cur := times[0]
	prev := s.cpuPrev
	s.cpuPrev = &cur
	if prev == nil {
		return nil
	}
	a, b := cpuParts(*prev), cpuParts(cur)
	total := b.total - a.total
	if total <= 0 {
		// Less than a clock tick since the last read: nothing to divide.
		return nil
	}
	pct := func(x, y float64) float64 { return clamp(100 * (y - x) / total) }
	out["cpu_user"] = pct(a.user, b.user)
	out["cpu_system"] = pct(a.system, b.system)
	out["cpu_iowait"] = pct(a.iowait, b.iowait)
	out["cpu_idle"] = pct(a.idle, b.idle)
	out["cpu"] = clamp(100 - out["cpu_idle"] - out["cpu_iowait"])
	return nil
}

type cpuSplit struct{ total, user, system, idle, iowait float64 }

// cpuParts groups the kernel's CPU times. On Linux guest time is already
// inside user and nice, so it is not counted twice (as top does).
func cpuParts(t cpu.TimesStat) cpuSplit {
	total := t.User + t.System + t.Idle + t.Nice + t.Iowait + t.Irq + t.Softirq + t.Steal
	user := t.User + t.Nice
	if runtime.GOOS == "linux" {
		user -= t.Guest + t.GuestNice
	} else {
		total += t.Guest + t.GuestNice
	}
	return cpuSplit{total: total, user: user, system: t.System + t.Irq + t.Softirq, idle: t.Idle, iowait: t.Iowait}
}

func clamp(v float64) float64 { return min(100, max(0, v)) }

func orNoData(err error) error {
	if err == nil {
		return errors.New("no data")
	}
	return err
}

func (s *hostSampler) readLoad(ctx context.Context, out map[string]float64) error {
	l, err := load.AvgWithContext(ctx)
	if err != nil {
		return fmt.Errorf("reading load average: %w", err)
	}
	out["load1"] = l.Load1
	out["load_per_core"] = l.Load1 / float64(s.cores)
	return nil
}

func (s *hostSampler) readMem(ctx context.Context, out map[string]float64) error {
	m, err := mem.VirtualMemoryWithContext(ctx)
	if err != nil {
		return fmt.Errorf("reading memory: %w", err)
	}
	out["mem"] = m.UsedPercent
	out["mem_used_mb"] = float64(m.Used) / 1e6
	return nil
}

func (s *hostSampler) readNet(ctx context.Context, out map[string]float64) error {
	counters, err := net.IOCountersWithContext(ctx, true)
	if err != nil {
		return fmt.Errorf("reading network counters: %w", err)
	}
	now := time.Now()
	cur := map[string][2]uint64{}
	for _, c := range counters {
		if s.ifaces != nil && !slices.Contains(s.ifaces, c.Name) || s.ifaces == nil && s.loopback[c.Name] {
			continue
		}
		cur[c.Name] = [2]uint64{c.BytesRecv, c.BytesSent}
	}
	in, outB, dt := deltas(s.netPrev, cur, s.netAt, now)
	s.netPrev, s.netAt = cur, now
	if dt > 0 {
		out["net_in_mbps"] = in / dt / 1e6
		out["net_out_mbps"] = outB / dt / 1e6
	}
	return nil
}

func (s *hostSampler) readDisk(ctx context.Context, out map[string]float64) error {
	// IOCounters rewrites the names it is given, hence the copy.
	counters, err := disk.IOCountersWithContext(ctx, slices.Clone(s.diskNames)...)
	if err != nil {
		return fmt.Errorf("reading disk counters: %w", err)
	}
	now := time.Now()
	cur := map[string][2]uint64{}
	for name, c := range counters {
		if s.disks != nil && !s.disks[name] {
			continue
		}
		cur[name] = [2]uint64{c.ReadBytes, c.WriteBytes}
	}
	r, w, dt := deltas(s.diskPrev, cur, s.diskAt, now)
	s.diskPrev, s.diskAt = cur, now
	if dt > 0 {
		out["disk_read_mbps"] = r / dt / 1e6
		out["disk_write_mbps"] = w / dt / 1e6
	}
	return nil
}

// deltas sums the growth of two counters per device since the last read.
// A device that just appeared, or whose counters went back (reset, wrap),
// adds nothing this time rather than its whole history. dt is 0 when there
// is no previous read.
func deltas(prev, cur map[string][2]uint64, prevAt, now time.Time) (a, b, dt float64) {
	if prev == nil {
		return 0, 0, 0
	}
	for name, c := range cur {
		p, ok := prev[name]
		if !ok {
			continue
		}
		if c[0] >= p[0] {
			a += float64(c[0] - p[0])
		}
		if c[1] >= p[1] {
			b += float64(c[1] - p[1])
		}
	}
	return a, b, now.Sub(prevAt).Seconds()
}

func (s *hostSampler) readProcess(ctx context.Context, out map[string]float64) error {
	if s.proc == nil {
		// The process was gone last time: a pidfile may name a new one.
		if err := s.findProcess(ctx); err != nil {
			return s.gone(err)
		}
	}
	times, err := s.proc.TimesWithContext(ctx)
	if err == nil {
		var m *process.MemoryInfoStat
		if m, err = s.proc.MemoryInfoWithContext(ctx); err == nil {
			out["rss_mb"] = float64(m.RSS) / 1e6
		}
	}
	if err != nil {
		old := s.pid
		s.proc = nil
		if s.cfg.PIDFile != "" && s.findProcess(ctx) == nil && s.pid != old {
			// A new process took over: its CPU counts from the next sample.
			return s.readProcess(ctx, out)
		}
		return s.gone(fmt.Errorf("process %d: %w", old, err))
	}
	s.goneReported = false
	now := time.Now()
	busy := times.User + times.System
	if !s.procAt.IsZero() {
		if dt := now.Sub(s.procAt).Seconds(); dt > 0 && busy >= s.procPrev {
			out["proc_cpu"] = 100 * (busy - s.procPrev) / dt
		}
	}
	s.procPrev, s.procAt = busy, now
	return nil
}

// gone reports a vanished process once; later samples carry on with the
// host figures alone, since the engine drops a sample that has an error.
func (s *hostSampler) gone(err error) error {
	if s.goneReported {
		return nil
	}
	s.goneReported = true
	return err
}
