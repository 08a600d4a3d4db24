package netns_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/planrun/planrun/internal/testenv"
)

// prefix starts the name of every namespace and link the tests create,
// followed by the test process's id, so that leftovers of a test that was
// killed are recognised and removed (and those of a test still running are
// left alone).
const prefix = "prnt"

// controlPort is where every worker listens, each on its own address.
const controlPort = 7070

// lab is a small network of namespaces joined by a bridge in the root
// namespace, where the test and the conductor run: 10.231.N.1 is the
// bridge, every host gets an address of its own in 10.231.N.0/24.
type lab struct {
	t      *testing.T
	ctx    context.Context
	name   string // prefix + pid
	net    string // 10.231.N
	bridge string
	dir    string
	hosts  int
}

// host is one namespace: its name, its address and the root end of its
// veth pair (the other end is eth0 in the namespace).
type host struct {
	name string // short name: w0, mq, kafka
	ns   string
	ip   string
	link string
}

// newLab checks what the tests need, removes what killed runs left and
// creates the bridge; everything is removed when the test ends.
func newLab(t *testing.T, ctx context.Context) *lab {
	t.Helper()
	if testing.Short() {
		t.Skip("network namespaces: end-to-end")
	}
	testenv.Root(t)
	for _, p := range [][2]string{{"ip", "iproute2"}, {"tcpdump", "tcpdump"}, {"mosquitto", "mosquitto"},
		{"mosquitto_passwd", "mosquitto"}, {"mosquitto_sub", "mosquitto-clients"}, {"go", "golang"}} {
		testenv.Program(t, p[0], p[1])
	}
	removeLeftovers(t)
	l := &lab{t: t, ctx: ctx, name: prefix + strconv.Itoa(os.Getpid()), dir: t.TempDir()}
	l.bridge = l.name + "b"
	l.net = freeSubnet(t)
	ipCmd(t, "link", "add", l.bridge, "type", "bridge")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", l.bridge).Run() })
	ipCmd(t, "addr", "add", l.net+".1/24", "dev", l.bridge)
	ipCmd(t, "link", "set", l.bridge, "up")
	return l
}

// ipCmd runs ip with args and fails the test if it fails.
func ipCmd(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// freeSubnet picks a 10.231.N.0/24 nothing on the machine uses, starting
// from one the process id picks.
func freeSubnet(t *testing.T) string {
	t.Helper()
	used := ipCmd(t, "-4", "-o", "addr", "show") + ipCmd(t, "-4", "route", "show")
	for i := range 240 {
		n := fmt.Sprintf("10.231.%d", 10+(os.Getpid()+i)%240)
		if !strings.Contains(used, n+".") {
			return n
		}
	}
	t.Fatal("no free 10.231.N.0/24")
	return ""
}

var leftover = regexp.MustCompile(`^` + prefix + `(\d+)`)

// removeLeftovers deletes the namespaces and links of test processes that
// no longer exist (a test killed before its cleanup), with what runs in
// those namespaces.
func removeLeftovers(t *testing.T) {
	t.Helper()
	dead := func(name string) bool {
		m := leftover.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		_, err := os.Stat("/proc/" + m[1])
		return os.IsNotExist(err)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && dead(f[0]) {
			t.Logf("removing namespace %s left by an earlier run", f[0])
			deleteNS(f[0])
		}
	}
	out, _ = exec.Command("ip", "-o", "link", "show").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if dead(name) {
			t.Logf("removing link %s left by an earlier run", name)
			_ = exec.Command("ip", "link", "del", name).Run()
		}
	}
}

// deleteNS kills what runs in a namespace and deletes it (with its end of
// the veth pair, which takes the other end along).
func deleteNS(ns string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = exec.Command("ip", "netns", "del", ns).Run()
}

// add creates a namespace with its own address on the bridge.
func (l *lab) add(name string) *host {
	t := l.t
	t.Helper()
	l.hosts++
	h := &host{name: name, ns: l.name + "-" + name, ip: fmt.Sprintf("%s.%d", l.net, 10+l.hosts), link: fmt.Sprintf("%sv%d", l.name, l.hosts)}
	ipCmd(t, "netns", "add", h.ns)
	t.Cleanup(func() {
		deleteNS(h.ns)
		_ = exec.Command("ip", "link", "del", h.link).Run()
	})
	ipCmd(t, "link", "add", h.link, "type", "veth", "peer", "name", "eth0", "netns", h.ns)
	ipCmd(t, "link", "set", h.link, "master", l.bridge, "up")
	ipCmd(t, "-n", h.ns, "addr", "add", h.ip+"/24", "dev", "eth0")
	ipCmd(t, "-n", h.ns, "link", "set", "eth0", "up")
	ipCmd(t, "-n", h.ns, "link", "set", "lo", "up")
	return h
}

// proc is a process the test started in one of its namespaces.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *watch
	done chan struct{}
	err  error
}

// start runs argv in h's namespace and, when ready is set, waits until its
// output says so. The process is killed when the test ends (and by the
// kernel when the test process dies first).
func (l *lab) start(t *testing.T, h *host, name string, env []string, ready string, argv ...string) *proc {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.ns}, argv...)...)
	cmd.Env = append(os.Environ(), env...)
	p := &proc{name: name, cmd: cmd, out: newWatch(ready), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	// ip netns exec execs the program: the process is the program's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	if ready == "" {
		return p
	}
	ctx, cancel := context.WithTimeout(l.ctx, 30*time.Second)
	defer cancel()
	select {
	case <-p.out.ready:
	case <-p.done:
		t.Fatalf("%s ended (%v) before it was ready:\n%s", name, p.err, p.out)
	case <-ctx.Done():
		t.Fatalf("%s not ready after 30s:\n%s", name, p.out)
	}
	return p
}

func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop ends the process with SIGTERM and waits for it (killing it after
// 10 s).
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

// watch keeps a process's output and says when a line with ready came.
type watch struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	want    []byte
	ready   chan struct{}
	seen    bool
	changed chan struct{} // closed at the next write
}

func newWatch(ready string) *watch {
	return &watch{want: []byte(ready), ready: make(chan struct{}), changed: make(chan struct{})}
}

func (w *watch) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	if !w.seen && len(w.want) > 0 && bytes.Contains(w.buf.Bytes(), w.want) {
		w.seen = true
		close(w.ready)
	}
	close(w.changed)
	w.changed = make(chan struct{})
	return len(b), nil
}

// await waits until the output matches re, or ctx ends.
func (w *watch) await(ctx context.Context, re *regexp.Regexp) bool {
	for {
		w.mu.Lock()
		ok, changed := re.Match(w.buf.Bytes()), w.changed
		w.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

func (w *watch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitTCP waits until addr accepts connections from the root namespace.
func (l *lab) waitTCP(t *testing.T, addr string, p *proc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(l.ctx, 30*time.Second)
	defer cancel()
	for {
		d := net.Dialer{Timeout: time.Second}
		if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
			_ = c.Close()
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%s ended (%v):\n%s", p.name, p.err, p.out)
		case <-ctx.Done():
			t.Fatalf("%s does not accept on %s after 30s:\n%s", p.name, addr, p.out)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// secret returns a random string no capture can contain by chance.
func secret(t *testing.T, kind string) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return kind + "-" + hex.EncodeToString(b)
}

// build builds planrun from this tree.
func build(t *testing.T, ctx context.Context) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "planrun")
	bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(bctx, "go", "build", "-o", bin, "github.com/planrun/planrun").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
