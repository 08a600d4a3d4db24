package nats

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planrun/planrun/drivers"
)

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func mustOpen(t testing.TB, cfg *TargetConfig) *Target {
	t.Helper()
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	tg, err := open(testCtx(t, time.Minute), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tg.Close() })
	return tg
}

// server is a NATS server a test runs against: the embedded one, or
// Debian's nats-server from .ci/services.sh.
type testServer struct {
	name    string
	url     string // "embedded" or nats://
	monitor string // http:// of /varz, /connz, /jsz ("" for embedded: the target knows)
}

func servers(t *testing.T) []testServer {
	out := []testServer{{name: "embedded", url: Embedded}}
	u, m := os.Getenv("PLANRUN_TEST_NATS"), os.Getenv("PLANRUN_TEST_NATS_MONITOR")
	switch {
	case u != "" && m != "":
		out = append(out, testServer{name: "nats-server", url: u, monitor: m})
	case os.Getenv("CI") == "true":
		t.Fatal("PLANRUN_TEST_NATS and PLANRUN_TEST_NATS_MONITOR are not set; CI must start the brokers with eval \"$(bash .ci/services.sh)\"")
	default:
		t.Log("PLANRUN_TEST_NATS is not set: the embedded server only (eval \"$(bash .ci/services.sh)\" starts Debian's nats-server)")
	}
	return out
}

// eachServer runs test against every server, with a target whose streams
// are given.
func eachServer(t *testing.T, streams map[string]StreamConfig, test func(t *testing.T, tg *Target, monitor string)) {
	for _, s := range servers(t) {
		t.Run(s.name, func(t *testing.T) {
			tg := mustOpen(t, &TargetConfig{URL: s.url, Streams: streams})
			mon := s.monitor
			if mon == "" {
				mon = tg.MonitorURL()
			}
			test(t, tg, mon)
		})
	}
}

// getJSON reads a monitoring endpoint.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

// connStats are one client connection's counts, as the server keeps them.
type connStats struct {
	Name    string `json:"name"`
	InMsgs  int64  `json:"in_msgs"`
	OutMsgs int64  `json:"out_msgs"`
	Subs    int    `json:"subscriptions"`
}

// connByName reads the server's counts of the open connection called name.
func connByName(t *testing.T, monitor, name string) connStats {
	t.Helper()
	var cz struct {
		Connections []connStats `json:"connections"`
	}
	getJSON(t, monitor+"/connz?limit=100000", &cz)
	for _, c := range cz.Connections {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the server lists no connection named %s", name)
	return connStats{}
}

// streamMessages is what /jsz says stream holds.
func streamMessages(t *testing.T, monitor, stream string) int64 {
	t.Helper()
	var jz struct {
		Accounts []struct {
			Streams []struct {
				Name  string `json:"name"`
				State struct {
					Msgs int64 `json:"messages"`
				} `json:"state"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	getJSON(t, monitor+"/jsz?accounts=true&streams=true", &jz)
	for _, a := range jz.Accounts {
		for _, s := range a.Streams {
			if s.Name == stream {
				return s.State.Msgs
			}
		}
	}
	t.Fatalf("/jsz lists no stream %s", stream)
	return 0
}

// varz reads the server's message counters.
func varz(t *testing.T, monitor string) (in, out int64) {
	t.Helper()
	var v struct {
		InMsgs  int64 `json:"in_msgs"`
		OutMsgs int64 `json:"out_msgs"`
	}
	getJSON(t, monitor+"/varz", &v)
	return v.InMsgs, v.OutMsgs
}

// events records connection events.
type events struct {
	mu sync.Mutex
	ev []drivers.Event
}

func (e *events) Event(ev drivers.Event) {
	e.mu.Lock()
	e.ev = append(e.ev, ev)
	e.mu.Unlock()
}

func (e *events) count(kind string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.ev {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// eventually polls cond every 10ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// collector runs a consumer and records what it receives, by value.
type collector struct {
	mu     sync.Mutex
	seen   map[string]int
	topics map[string]int
	n      atomic.Int64
	done   chan error
	cancel context.CancelFunc
}

func collect(c drivers.Consumer) *collector {
	ctx, cancel := context.WithCancel(context.Background())
	col := &collector{seen: map[string]int{}, topics: map[string]int{}, done: make(chan error, 1), cancel: cancel}
	go func() {
		col.done <- c.Run(ctx, func(m *drivers.Message) {
			col.mu.Lock()
			col.seen[string(m.Value)]++
			col.topics[m.Topic]++
			col.mu.Unlock()
			col.n.Add(1)
		})
	}()
	return col
}

func (col *collector) stop(t *testing.T) {
	t.Helper()
	col.cancel()
	select {
	case err := <-col.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("consumer did not stop")
	}
}

func (col *collector) wait(t *testing.T, n int) {
	t.Helper()
	eventually(t, time.Minute, fmt.Sprintf("%d messages", n), func() bool { return col.n.Load() >= int64(n) })
}

// check asserts that exactly the n values of prefix arrived, each once.
func (col *collector) check(t *testing.T, prefix string, n int) {
	t.Helper()
	col.mu.Lock()
	defer col.mu.Unlock()
	lost, dups := 0, 0
	for i := range n {
		switch c := col.seen[value(prefix, i)]; {
		case c == 0:
			lost++
		case c > 1:
			dups += c - 1
		}
	}
	if lost != 0 || dups != 0 || len(col.seen) != n {
		t.Errorf("%d distinct values received, want %d: %d lost, %d duplicates", len(col.seen), n, lost, dups)
	}
}

func value(prefix string, i int) string { return prefix + "-" + strconv.Itoa(i) }

// send sends n values of prefix to subjects in turn, through SendAsync
// (threads goroutines), and returns how many were acked.
func send(t *testing.T, p drivers.Producer, subjects []string, prefix string, n, threads int) {
	t.Helper()
	var wg sync.WaitGroup
	var failed atomic.Int64
	var next atomic.Int64
	for range threads {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				m := &drivers.Message{Topic: subjects[i%len(subjects)], Value: []byte(value(prefix, i))}
				if err := p.Send(context.Background(), m); err != nil {
					failed.Add(1)
					t.Errorf("send %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
}

func newProducer(t *testing.T, tg *Target, workload, topic string, o *ProduceOptions, ev drivers.EventSink) drivers.Producer {
	t.Helper()
	p, err := tg.NewProducer(testCtx(t, time.Minute), drivers.ProducerSpec{Workload: workload, Topic: topic, Threads: 1, Events: ev}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func newConsumer(t *testing.T, tg *Target, instance, topic, group string, o *ConsumeOptions, ev drivers.EventSink) drivers.Consumer {
	t.Helper()
	c, err := tg.NewConsumer(testCtx(t, time.Minute), drivers.ConsumerSpec{Workload: instance, Instance: instance, Topic: topic, Group: group, Events: ev}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Core subjects: N messages to two subjects reach a subscriber of a
// wildcard exactly once each, and the server's own per-connection counts
// say the same: the producer's connection published N, the subscriber's
// got N.
func TestCoreCounts(t *testing.T) {
	const n = 3000
	eachServer(t, nil, func(t *testing.T, tg *Target, mon string) {
		id := randomHex(4)
		base := "planrun.test." + id
		c := newConsumer(t, tg, "sub-"+id, base+".*", "g", &ConsumeOptions{}, nil)
		col := collect(c)
		p := newProducer(t, tg, "pub-"+id, base+".a", &ProduceOptions{}, nil)
		in0, out0 := varz(t, mon)
		send(t, p, []string{base + ".a", base + ".b"}, id, n, 8)
		col.wait(t, n)
		col.check(t, id, n)
		if col.topics[base+".a"] != n/2 || col.topics[base+".b"] != n/2 {
			t.Errorf("subjects %v", col.topics)
		}
		if pc := connByName(t, mon, "planrun-pub-"+id); pc.InMsgs != n {
			t.Errorf("the server counted %d messages from the producer's connection, want %d", pc.InMsgs, n)
		}
		if cc := connByName(t, mon, "planrun-sub-"+id); cc.OutMsgs != n {
			t.Errorf("the server counted %d messages to the subscriber's connection, want %d", cc.OutMsgs, n)
		}
		if tg.MonitorURL() != "" {
			// The embedded server is this test's alone: its totals too.
			in1, out1 := varz(t, mon)
			if in1-in0 != n || out1-out0 != n {
				t.Errorf("/varz in_msgs +%d, out_msgs +%d, want +%d each", in1-in0, out1-out0, n)
			}
		}
		col.stop(t)
	})
}

// JetStream: N publishes acked by a file stream are delivered to a durable
// pull (and push) consumer exactly once each; /jsz counts N messages in the
// stream, and the consumer has acknowledged them all (lag 0).
func TestJetStreamCounts(t *testing.T) {
	const n = 3000
	for _, mode := range []string{"pull", "push"} {
		t.Run(mode, func(t *testing.T) {
			id := randomHex(4)
			stream := "PLANRUN_" + id
			subj := "planrun.js." + id
			eachServer(t, map[string]StreamConfig{stream: {Subjects: []string{subj + ".>"}}}, func(t *testing.T, tg *Target, mon string) {
				p := newProducer(t, tg, "pub-"+id, subj+".a", &ProduceOptions{JetStream: true}, nil)
				send(t, p, []string{subj + ".a", subj + ".b.c"}, id, n, 8)
				if got := streamMessages(t, mon, stream); got != n {
					t.Errorf("/jsz: stream %s holds %d messages, want %d", stream, got, n)
				}
				if pc := connByName(t, mon, "planrun-pub-"+id); pc.InMsgs != n || pc.OutMsgs != n {
					t.Errorf("the producer's connection: %d in, %d out (acks), want %d each", pc.InMsgs, pc.OutMsgs, n)
				}
				c := newConsumer(t, tg, "sub-"+id, subj+".>", "g-"+id, &ConsumeOptions{JetStream: true, Mode: mode}, nil)
				if lag, err := tg.Lag(testCtx(t, 10*time.Second), subj+".>", "g-"+id); err != nil || lag != n {
					t.Errorf("lag before consuming %d (%v), want %d", lag, err, n)
				}
				col := collect(c)
				col.wait(t, n)
				col.stop(t)
				col.check(t, id, n)
				eventually(t, 10*time.Second, "lag 0 after consuming", func() bool {
					lag, err := tg.Lag(testCtx(t, 10*time.Second), subj+".>", "g-"+id)
					return err == nil && lag == 0
				})
				if g := c.(drivers.Gauger).Gauges(); g["redelivered"] != 0 || g["received"] != n {
					t.Errorf("gauges %v", g)
				}
			})
		})
	}
}

// A durable consumer stopped halfway and started again continues where
// the group was: the two runs together got every message once.
func TestJetStreamResume(t *testing.T) {
	const n = 2000
	id := randomHex(4)
	stream := "PLANRUN_R" + id
	subj := "planrun.resume." + id
	eachServer(t, map[string]StreamConfig{stream: {Subjects: []string{subj}}}, func(t *testing.T, tg *Target, mon string) {
		p := newProducer(t, tg, "pub-"+id, subj, &ProduceOptions{JetStream: true}, nil)
		send(t, p, []string{subj}, id, n, 4)
		o := &ConsumeOptions{JetStream: true, Batch: 50, MaxAckPending: 100}
		c1 := newConsumer(t, tg, "first-"+id, subj, "g", o, nil)
		col1 := collect(c1)
		col1.wait(t, n/4)
		col1.stop(t)
		_ = c1.Close()
		got1 := int(col1.n.Load())
		if got1 >= n {
			t.Fatalf("the first consumer read everything (%d) before it stopped", got1)
		}
		// The server applies acks in the background: the lag comes down to
		// what the first consumer did not count.
		var lag int64
		eventually(t, 10*time.Second, fmt.Sprintf("lag %d", n-got1), func() bool {
			var err error
			lag, err = tg.Lag(testCtx(t, 10*time.Second), subj, "g")
			return err == nil && lag == int64(n-got1)
		})
		c2 := newConsumer(t, tg, "second-"+id, subj, "g", o, nil)
		col2 := collect(c2)
		col2.wait(t, n-got1)
		col2.stop(t)
		for v, k := range col1.seen {
			col2.seen[v] += k
		}
		col2.check(t, id, n)
		t.Logf("first consumer %d, second %d", got1, col2.n.Load())
	})
}

// What a plan uses beyond nats-server 2.9 is refused by name on 2.9, and
// works on the embedded (newer) server.
func TestNewerFeaturesRefusedOn29(t *testing.T) {
	for _, s := range servers(t) {
		t.Run(s.name, func(t *testing.T) {
			id := randomHex(4)
			stream := "PLANRUN_F" + id
			tg := mustOpen(t, &TargetConfig{URL: s.url, Streams: map[string]StreamConfig{stream: {Subjects: []string{"planrun.f." + id + ".>"}}}})
			_, err := tg.NewConsumer(testCtx(t, time.Minute), drivers.ConsumerSpec{Workload: "w", Topic: "planrun.f." + id + ".>", Group: "g"},
				&ConsumeOptions{JetStream: true, FilterSubjects: []string{"planrun.f." + id + ".a", "planrun.f." + id + ".b"}})
			_, err2 := open(testCtx(t, time.Minute), &TargetConfig{URL: s.url, Streams: map[string]StreamConfig{stream + "Z": {Compression: "s2"}}})
			if tg.atLeast(2, 10) {
				if err != nil || err2 != nil {
					t.Errorf("nats-server %s: %v; %v", tg.ServerVersion(), err, err2)
				}
				return
			}
			for _, e := range []error{err, err2} {
				if e == nil || !strings.Contains(e.Error(), "needs nats-server 2.10 or later") || !strings.Contains(e.Error(), tg.ServerVersion()) {
					t.Errorf("nats-server %s: got %v, want a refusal naming the versions", tg.ServerVersion(), e)
				}
			}
		})
	}
}

// A server that is not there is a clear error at open.
func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, err = open(testCtx(t, time.Minute), &TargetConfig{URL: "nats://" + addr})
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("got %v, want connection refused naming %s", err, addr)
	}
}

// Credentials the server refuses are a clear error at open.
func TestBadCredentials(t *testing.T) {
	tg := mustOpen(t, &TargetConfig{URL: Embedded, Username: "u", Password: "right"})
	_, err := open(testCtx(t, time.Minute), &TargetConfig{URL: tg.URL(), Username: "u", Password: "wrong"})
	if err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Errorf("the error shows the password: %v", err)
	}
}

// A JetStream publish to a subject no stream stores is refused when the
// producer opens, naming the fix.
func TestJetStreamWithoutStream(t *testing.T) {
	tg := mustOpen(t, &TargetConfig{URL: Embedded})
	_, err := tg.NewProducer(testCtx(t, time.Minute), drivers.ProducerSpec{Workload: "w", Topic: "nowhere"}, &ProduceOptions{JetStream: true})
	if err == nil || !strings.Contains(err.Error(), "no stream stores subject nowhere") {
		t.Fatalf("got %v", err)
	}
}

func TestSubjectMatches(t *testing.T) {
	for _, c := range []struct {
		filter, subject string
		want            bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
		{"a.*", "a", false},
		{"a.>", "a.b", true},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{"*.b.*", "x.b.y", true},
		{"*.b.*", "x.c.y", false},
		{">", "a", true},
		{">", "a.b.c", true},
		{"a.b.c", "a.b", false},
	} {
		if got := SubjectMatches(strings.Split(c.filter, "."), c.subject); got != c.want {
			t.Errorf("%s matches %s: %v, want %v", c.filter, c.subject, got, c.want)
		}
	}
}

func TestCheckConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  interface{ Check() error }
		want string
	}{
		{"no url", &TargetConfig{}, "url is empty"},
		{"scheme", &TargetConfig{URL: "http://x:1"}, `scheme "http"`},
		{"creds in url", &TargetConfig{URL: "nats://u:p@x:1"}, "credentials"},
		{"storage", &TargetConfig{URL: Embedded, Streams: map[string]StreamConfig{"S": {Storage: "disk"}}}, `storage "disk": use file, memory`},
		{"stream name", &TargetConfig{URL: Embedded, Streams: map[string]StreamConfig{"a.b": {}}}, "stream name"},
		{"replicas", &TargetConfig{URL: Embedded, Streams: map[string]StreamConfig{"S": {Replicas: 7}}}, "replicas 7"},
		{"dir", &TargetConfig{URL: "nats://x:1", Dir: "/tmp"}, "dir is for url: embedded"},
		{"publish wildcard", &TargetConfig{URL: Embedded, Streams: map[string]StreamConfig{"S": {Subjects: []string{"a.>.b"}}}}, "last token"},
		{"ack policy", &ConsumeOptions{JetStream: true, AckPolicy: "sometimes"}, `ack_policy "sometimes"`},
		{"core with js keys", &ConsumeOptions{MaxAckPending: 5}, "max_ack_pending: JetStream settings; add jetstream: true"},
		{"push batch", &ConsumeOptions{JetStream: true, Mode: "push", Batch: 5}, "batch is for mode: pull"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Check()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
	if err := (&TargetConfig{URL: "nats://a:4222, nats://b:4222"}).Check(); err != nil {
		t.Errorf("a cluster url: %v", err)
	}
}

// natsServerBin is Debian's nats-server, for tests that start their own.
func natsServerBin(t *testing.T) string {
	for _, p := range []string{"/usr/sbin/nats-server", "/usr/bin/nats-server"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("nats-server is not installed; .ci/services.sh installs it")
	}
	t.Skip("nats-server is not installed (apt-get install nats-server)")
	return ""
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ownServer is a nats-server process a test starts, kills and starts again.
type ownServer struct {
	bin, dir   string
	port, http int
	cmd        *exec.Cmd
}

func (s *ownServer) start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-m", strconv.Itoa(s.http),
		"-js", "-sd", filepath.Join(s.dir, "js"), "-l", filepath.Join(s.dir, "log"))
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz?js-enabled-only=true", s.http)
	eventually(t, 30*time.Second, "nats-server to answer", func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func (s *ownServer) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Debian's nats-server killed mid-run and started again on its directory:
// every connection reports the loss and the return, sends fail meanwhile,
// and of a file stream nothing acknowledged is lost.
func TestServerKilledAndRestarted(t *testing.T) {
	s := &ownServer{bin: natsServerBin(t), dir: t.TempDir(), port: freePort(t), http: freePort(t)}
	s.start(t)
	t.Cleanup(s.kill)
	id := randomHex(4)
	subj := "planrun.restart." + id
	tg := mustOpen(t, &TargetConfig{URL: fmt.Sprintf("nats://127.0.0.1:%d", s.port), ReconnectWait: 50 * time.Millisecond,
		Streams: map[string]StreamConfig{"RESTART": {Subjects: []string{subj}}}})
	var pev, cev events
	p := newProducer(t, tg, "pub", subj, &ProduceOptions{JetStream: true, SendTimeout: 2 * time.Second}, &pev)
	c := newConsumer(t, tg, "sub", subj, "g", &ConsumeOptions{JetStream: true}, &cev)
	col := collect(c)

	var acked sync.Map
	var nacked, sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			v := value(id, i)
			sent.Add(1)
			if err := p.Send(context.Background(), &drivers.Message{Topic: subj, Value: []byte(v)}); err != nil {
				nacked.Add(1)
				continue
			}
			acked.Store(v, true)
		}
	})
	ackedN := func() int { n := 0; acked.Range(func(any, any) bool { n++; return true }); return n }
	eventually(t, 30*time.Second, "some acked sends", func() bool { return ackedN() >= 200 })
	s.kill()
	eventually(t, 10*time.Second, "disconnect events", func() bool {
		return pev.count(drivers.Disconnected) == 1 && cev.count(drivers.Disconnected) == 1
	})
	eventually(t, 10*time.Second, "failed sends while the server is down", func() bool { return nacked.Load() > 0 })
	s.start(t)
	eventually(t, 30*time.Second, "reconnect events", func() bool {
		return pev.count(drivers.Reconnected) == 1 && cev.count(drivers.Reconnected) == 1
	})
	before := ackedN()
	eventually(t, 30*time.Second, "sends acked after the restart", func() bool { return ackedN() >= before+200 })
	close(stop)
	wg.Wait()
	want := ackedN()
	eventually(t, time.Minute, "every acked message", func() bool {
		col.mu.Lock()
		defer col.mu.Unlock()
		n := 0
		acked.Range(func(k, _ any) bool {
			if col.seen[k.(string)] > 0 {
				n++
			}
			return true
		})
		return n == want
	})
	col.stop(t)
	col.mu.Lock()
	dups := 0
	for _, k := range col.seen {
		dups += k - 1
	}
	col.mu.Unlock()
	t.Logf("sent %d, acked %d, failed %d, received %d distinct (%d duplicates); producer events %d/%d",
		sent.Load(), want, nacked.Load(), len(col.seen), dups, pev.count(drivers.Disconnected), pev.count(drivers.Reconnected))
	if extra := len(col.seen) - want; extra < 0 || int64(extra) > nacked.Load() {
		t.Errorf("received %d distinct messages, acked %d, failed %d: received beyond acked must be failed sends the server stored", len(col.seen), want, nacked.Load())
	}
}
