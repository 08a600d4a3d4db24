package live

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/internal/browser"
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/reporters"
	"github.com/planrun/planrun/reporters/htmltest"
	"github.com/planrun/planrun/results"
)

// deadline bounds every wait of these tests: they await conditions, and a
// busy machine only makes them slower.
const deadline = 30 * time.Second

// startPage serves p on a loopback port until the test ends; it returns
// the base URL and a function that ends the serving context and waits for
// ServePage to return.
func startPage(t *testing.T, p *Page) (string, func()) {
	t.Helper()
	ln, remote, err := ListenPage("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if remote {
		t.Fatalf("%s is taken for a remote address", ln.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServePage(ctx, ln, p) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServePage: %v", err)
			}
		case <-time.After(deadline):
			t.Errorf("ServePage still serving %s after its context ended", deadline)
		}
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

// observe hands p a result whose only figure is n, as the engine would.
func observe(p *Page, n int) {
	p.Observe(engine.Live{Result: &results.Result{Plan: "live", Status: "running", Description: fmt.Sprint(n)},
		Progress: []string{fmt.Sprintf("step 2 (wait, line 9): wait until consumer.received >= 100: consumer.received = %d (target 100)", n)}})
}

// events reads an event stream: each message's data decoded as a model.
type events struct {
	resp *http.Response
	sc   *bufio.Scanner
}

type pageModel struct {
	Result struct {
		Plan        string `json:"plan"`
		Status      string `json:"status"`
		Description string `json:"description"`
	} `json:"result"`
	Live *reporters.HTMLLive `json:"live"`
}

func openEvents(t *testing.T, ctx context.Context, base string) *events {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+EventsPath, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", EventsPath, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("GET %s: Content-Type %q", EventsPath, ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<24)
	return &events{resp: resp, sc: sc}
}

// next returns the next message's model; the read ends with the test's
// deadline.
func (e *events) next(t *testing.T) (pageModel, error) {
	t.Helper()
	var data []string
	for e.sc.Scan() {
		line := e.sc.Text()
		switch {
		case line == "" && data != nil:
			var m pageModel
			if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &m); err != nil {
				t.Fatalf("message data is not a model: %v", err)
			}
			return m, nil
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
	if err := e.sc.Err(); err != nil {
		return pageModel{}, err
	}
	return pageModel{}, io.EOF
}

// Every model the engine hands over reaches an open page as one message,
// the whole model with its live object; the final one says done, and
// later observations are not sent.
func TestPageStreamsEveryModel(t *testing.T) {
	p := &Page{}
	base, _ := startPage(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	observe(p, 0)
	ev := openEvents(t, ctx, base)
	// The page gets the latest model at once, then each new one.
	const n = 5
	for i := 0; i <= n; i++ {
		m, err := ev.next(t)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if m.Result.Description != fmt.Sprint(i) || m.Live == nil || m.Live.Done || len(m.Live.Progress) != 1 ||
			!strings.Contains(m.Live.Progress[0], fmt.Sprintf("consumer.received = %d (target 100)", i)) {
			t.Fatalf("message %d: %+v, live %+v", i, m, m.Live)
		}
		if i < n {
			observe(p, i+1)
		}
	}
	p.Finish(&results.Result{Plan: "live", Status: "passed", Description: "final"})
	observe(p, 99)
	m, err := ev.next(t)
	if err != nil {
		t.Fatal(err)
	}
	if m.Result.Status != "passed" || m.Result.Description != "final" || m.Live == nil || !m.Live.Done {
		t.Fatalf("final message: %+v, live %+v", m, m.Live)
	}
	// The page serves the final result too.
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"description":"final"`) || !strings.Contains(string(body), `id="planrun-data"`) {
		t.Fatalf("GET /: %s\n%s", resp.Status, body)
	}
}

// A page that stops reading never holds up the engine: Observe returns at
// once while the page's stream waits to write, and another page gets the
// latest model.
func TestSlowPageNeverBlocksTheRun(t *testing.T) {
	p := &Page{}
	p.WriteTimeout = time.Hour
	base, _ := startPage(t, p)
	slow := stalledStream(t, base, p)
	const observations = 30
	observeBig(t, p, observations)
	if n := p.Streams(); n != 1 {
		t.Fatalf("%d streams open; the page that does not read should still be waiting to write", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	m, err := openEvents(t, ctx, base).next(t)
	if err != nil {
		t.Fatal(err)
	}
	if m.Result.Description != fmt.Sprint(observations-1) {
		t.Errorf("a new page got model %q, want the latest (%d)", m.Result.Description, observations-1)
	}
	slow.Close()
}

// A page that cannot take a message for WriteTimeout is closed.
func TestStalledPageIsDropped(t *testing.T) {
	p := &Page{}
	p.WriteTimeout = 200 * time.Millisecond
	base, _ := startPage(t, p)
	slow := stalledStream(t, base, p)
	defer slow.Close()
	observeBig(t, p, 30)
	awaitStreams(t, p, 0)
}

// stalledStream opens an event stream that reads nothing.
func stalledStream(t *testing.T, base string, p *Page) net.Conn {
	t.Helper()
	slow, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := slow.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(slow, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", EventsPath)
	awaitStreams(t, p, 1)
	return slow
}

// observeBig hands p n models of a MiB each (more than the connection's
// buffers hold) and fails if that takes the test's deadline.
func observeBig(t *testing.T, p *Page, n int) {
	t.Helper()
	big := strings.Repeat("x", 1<<20)
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		for i := range n {
			p.Observe(engine.Live{Result: &results.Result{Plan: "live", Description: fmt.Sprint(i), Title: big}})
		}
	}()
	select {
	case <-observed:
	case <-time.After(deadline):
		t.Fatalf("%d observations took more than %s with a page that does not read", n, deadline)
	}
}

// awaitStreams waits until p has n event streams open.
func awaitStreams(t *testing.T, p *Page, n int) {
	t.Helper()
	end := time.Now().Add(deadline)
	for p.Streams() != n {
		if time.Now().After(end) {
			t.Fatalf("%d event streams open after %s, want %d", p.Streams(), deadline, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The streams are bounded: one more is refused with 503, and a page that
// goes away frees its place.
func TestClosedPageFreesItsStream(t *testing.T) {
	p := &Page{}
	p.MaxStreams = 1
	base, _ := startPage(t, p)
	observe(p, 1)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	first, firstCancel := context.WithCancel(ctx)
	ev := openEvents(t, first, base)
	if _, err := ev.next(t); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + EventsPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a stream beyond MaxStreams: %s, want 503", resp.Status)
	}
	firstCancel()
	awaitStreams(t, p, 0)
	if _, err := openEvents(t, ctx, base).next(t); err != nil {
		t.Fatal(err)
	}
}

// When the serving context ends, every stream gets the model it has not
// had yet and is closed, and ServePage returns.
func TestPageStopsWithItsContext(t *testing.T) {
	p := &Page{}
	base, stop := startPage(t, p)
	observe(p, 1)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var evs []*events
	for range 3 {
		ev := openEvents(t, ctx, base)
		if _, err := ev.next(t); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	p.Finish(&results.Result{Plan: "live", Status: "passed"})
	stop()
	for i, ev := range evs {
		// The final model may have been sent before the context ended or
		// as it ended; either way it is there, then the stream ends.
		m, err := ev.next(t)
		if err != nil || m.Live == nil || !m.Live.Done {
			t.Errorf("stream %d: %+v, %v; want the final model", i, m, err)
		}
		if _, err := ev.next(t); !errors.Is(err, io.EOF) {
			t.Errorf("stream %d after the final model: %v, want its end", i, err)
		}
	}
	if n := p.Streams(); n != 0 {
		t.Errorf("%d streams open after the context ended", n)
	}
}

// An address without a host is loopback: the page cannot be reached on
// the machine's other addresses unless one is given.
func TestListenPageIsLoopbackByDefault(t *testing.T) {
	for _, addr := range []string{":0", "0", "localhost:0", "[::1]:0"} {
		ln, remote, err := ListenPage(addr)
		if err != nil {
			if addr == "[::1]:0" {
				continue // no IPv6 loopback here
			}
			t.Fatalf("%s: %v", addr, err)
		}
		ta := ln.Addr().(*net.TCPAddr)
		if !ta.IP.IsLoopback() || remote {
			t.Errorf("%s bound %s (remote %v), want loopback", addr, ta, remote)
		}
		ln.Close()
	}
	if _, _, err := ListenPage("8080x"); err == nil || !strings.Contains(err.Error(), "give host:port") {
		t.Errorf("a bad address: %v", err)
	}

	ip := hostAddress(t)
	ln, _, err := ListenPage(":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), fmt.Sprint(port)), deadline)
	if err == nil {
		c.Close()
		t.Fatalf("the default page address took a connection on %s", ip)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("connecting on %s: %v, want connection refused", ip, err)
	}

	// Given explicitly, the host's address is served, and said to be.
	ln2, remote, err := ListenPage(net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	if !remote {
		t.Errorf("%s not reported as reachable from other hosts", ln2.Addr())
	}
	go func() {
		if c, err := ln2.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err = net.DialTimeout("tcp", ln2.Addr().String(), deadline)
	if err != nil {
		t.Fatalf("a page bound to %s: %v", ln2.Addr(), err)
	}
	c.Close()
}

// hostAddress is one of the machine's own non-loopback IPv4 addresses.
func hostAddress(t *testing.T) net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("interface addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP
		}
	}
	t.Skip("this machine has no non-loopback IPv4 address")
	return nil
}

// The model of a run with four workloads an hour and a day into it, made
// and encoded once a second while the run goes on: what it costs the
// observer's goroutine, and what each page receives.
func BenchmarkPageObserve(b *testing.B) {
	for _, c := range []struct {
		name    string
		seconds int
	}{{"hour", 3600}, {"day", 86400}} {
		b.Run(c.name, func(b *testing.B) { benchmarkObserve(b, c.seconds) })
	}
}

func benchmarkObserve(b *testing.B, seconds int) {
	const workloads = 4
	res := &results.Result{Plan: "bench", Status: "running"}
	run := results.Run{Status: "running", Kinds: map[string]string{}, Roles: map[string]metrics.Role{}}
	run.Metrics.Series = map[string][]metrics.Point{}
	for w := range workloads {
		name := fmt.Sprintf("w%d", w)
		run.Metrics.Order = append(run.Metrics.Order, name)
		run.Kinds[name] = "produce"
		run.Roles[name] = metrics.Role{Sends: true}
		pts := make([]metrics.Point, seconds)
		for i := range pts {
			pts[i] = metrics.Point{T: float64(i + 1), Interval: 1, Phase: "load", SendRate: 10000 + float64(i%100), P99: 3 + float64(i%7), Acked: 10000, Sent: 10000, Lag: -1}
		}
		run.Metrics.Series[name] = pts
	}
	run.Metrics.Phases = []metrics.Phase{{Name: "load", End: float64(seconds), Workloads: map[string]metrics.Stats{}}}
	res.Runs = []results.Run{run}
	p := &Page{}
	b.ResetTimer()
	for range b.N {
		p.Observe(engine.Live{Result: res, Progress: []string{"w0: 36000000 sent"}})
	}
	model, _ := p.latest()
	b.ReportMetric(float64(len(model))/1e6, "MB/model")
}

// The page served before the run's first second (no run yet) renders
// without a script error, then follows the stream to the final model.
func TestStartingPageInBrowser(t *testing.T) {
	browser.Chromium(t)
	p := &Page{}
	base, _ := startPage(t, p)
	go func() {
		// Once the browser follows the stream, the run ends.
		for end := time.Now().Add(browser.Timeout); p.Streams() == 0 && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		p.Finish(&results.Result{Plan: "live", Status: "passed"})
	}()
	page := htmltest.Open(t, base+"/", browser.Options{})
	page.NoErrors(t)
	if page.Renders != 2 || page.Status != "passed" || page.Live == nil || *page.Live != "run passed" {
		t.Errorf("%d renders, status %q, live panel %v; want the starting page's render, then the final model's", page.Renders, page.Status, page.Live)
	}
}

// An idle stream gets a comment line every Heartbeat, so that a browser
// gone without a word is noticed by the write failing.
func TestIdleStreamHeartbeat(t *testing.T) {
	p := &Page{Heartbeat: 20 * time.Millisecond}
	base, _ := startPage(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	ev := openEvents(t, ctx, base)
	beats := 0
	for beats < 2 && ev.sc.Scan() {
		if ev.sc.Text() == ": alive" {
			beats++
		}
	}
	if beats < 2 {
		t.Fatalf("%d heartbeats on an idle stream: %v", beats, ev.sc.Err())
	}
}
