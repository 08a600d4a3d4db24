package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planrun/planrun/internal/browser"
	"github.com/planrun/planrun/live"
	"github.com/planrun/planrun/reporters"
	"github.com/planrun/planrun/reporters/htmltest"
	"github.com/planrun/planrun/results"
)

// livePlan waits, after its load starts, for a file the test creates:
// its wait step's progress line shows until then.
const livePlan = `name: live-page
vars:
  gate: /nonexistent
targets:
  mq: { driver: memory }
workloads:
  producer: { produce: { topic: a, size: 100B, rate: 200 } }
  consumer: { consume: { topic: a } }
progress: 0s
steps:
  - shell: 'while [ ! -e "$GATE" ]; do sleep 0.05; done'
    env: { GATE: "${gate}" }
    background: true
    as: gate
  - start: [consumer, producer]
    phase: load
  - wait: consumer.received >= 300 && probes.gate.exit == 0
    timeout: 2m
  - stop: producer
    phase: drain
  - wait: consumer.backlog.messages == 0
    timeout: 30s
  - stop: consumer
`

// The live page of a run, in headless Chromium: while the run goes on it
// shows the wait's distance to its target and the charts of the seconds
// so far, and once the run has ended the final figures, the same as the
// result's JSON.
func TestDashboardInBrowser(t *testing.T) {
	browser.Chromium(t)
	gate := filepath.Join(t.TempDir(), "gate")
	p := writePlan(t, livePlan)
	out := t.TempDir()
	stderr := &syncBuffer{}
	exit := make(chan int, 1)
	go func() {
		// The flags after the plan, as in planrun PLAN --dashboard ADDR.
		exit <- run([]string{p, "--quiet", "--out", out, "--dashboard", "127.0.0.1:0", "--set", "gate=" + gate}, io.Discard, stderr)
	}()
	// Whatever happens, the run ends with the test.
	defer func() {
		_ = os.WriteFile(gate, nil, 0o644)
		select {
		case <-exit:
		case <-time.After(time.Minute):
			t.Errorf("the run did not end")
		}
	}()
	base := awaitMatch(t, stderr, regexp.MustCompile(`live page on (http://127\.0\.0\.1:\d+)/`), exit)

	t.Run("live", func(t *testing.T) {
		// The stream ends once the page had a model of the wait with
		// seconds measured, and is not opened again (204), so that
		// Chromium's virtual time runs out and it prints the page then.
		var shown reporters.HTMLModel
		proxy := eventProxy(t, base, func(m reporters.HTMLModel) bool {
			if m.Live == nil || len(m.Runs) == 0 || len(m.Runs[0].Charts) == 0 || m.Runs[0].Charts[0].Samples < 2 {
				return false
			}
			for _, l := range m.Live.Progress {
				if strings.Contains(l, "wait until consumer.received >= 300") && strings.Contains(l, "(target 300)") {
					shown = m
					return true
				}
			}
			return false
		})
		page := htmltest.Open(t, proxy+"/", browser.Options{})
		page.NoErrors(t)
		if page.Renders < 2 {
			t.Errorf("%d renders: the page did not take the stream's models", page.Renders)
		}
		if page.Live == nil || !strings.Contains(*page.Live, "wait until consumer.received >= 300") || !regexp.MustCompile(`consumer\.received = \d+ \(target 300\)`).MatchString(*page.Live) {
			t.Errorf("the progress panel does not show the wait's distance to its target: %v", page.Live)
		}
		if page.Status != "running" {
			t.Errorf("status %q, want running", page.Status)
		}
		want := shown.Runs[0].Charts[0]
		c := page.Chart(t, 0, want.Title)
		t.Logf("live page: %d renders, %d points of %q, progress panel:\n%s", page.Renders, c.Points, want.Title, *page.Live)
		if len(c.Series) != len(want.Series) || len(c.Series) != 2 || c.Points != want.Samples || c.Samples != want.Samples {
			t.Errorf("%s: %d curves of %d points from %d samples; the model had %d curves of %d samples",
				want.Title, len(c.Series), c.Points, c.Samples, len(want.Series), want.Samples)
		}
	})

	t.Run("final", func(t *testing.T) {
		// The run goes on once the page has its first model: the page
		// then follows it to its end.
		var once sync.Once
		proxy := eventProxy(t, base, func(reporters.HTMLModel) bool {
			once.Do(func() {
				if err := os.WriteFile(gate, nil, 0o644); err != nil {
					t.Error(err)
				}
			})
			return false
		})
		page := htmltest.Open(t, proxy+"/", browser.Options{})
		var code int
		select {
		case code = <-exit:
		case <-time.After(time.Minute):
			t.Fatal("the run did not end after the page was printed")
		}
		exit <- code // for the deferred wait
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, stderr.String())
		}
		res, err := results.Load(filepath.Join(out, "live-page.json"))
		if err != nil {
			t.Fatal(err)
		}
		page.NoErrors(t)
		if page.Status != res.Status {
			t.Errorf("status %q, the result's %q", page.Status, res.Status)
		}
		if page.Live == nil || *page.Live != "run passed" {
			t.Errorf("the progress panel shows %v, want the run's end", page.Live)
		}
		run := res.Runs[0]
		samples := len(run.Metrics.Series["producer"])
		if c := page.Chart(t, 0, "Message rates"); len(c.Series) != 2 || c.Points != samples {
			t.Errorf("Message rates: %d curves of %d points, the result has 2 workloads of %d samples", len(c.Series), c.Points, samples)
		}
		if len(run.Metrics.Phases) != 2 {
			t.Fatalf("the result has phases %q, want load and drain", run.Metrics.PhaseNames())
		}
		// The load phase, where both workloads ran throughout (the drain
		// phase may have no row of the stopped producer's).
		checkPhaseCells(t, page, run.Metrics.Phases[:1])
	})
}

// A --dashboard address planrun cannot serve is a usage error, before the
// run starts.
func TestDashboardAddressErrors(t *testing.T) {
	p := writePlan(t, memPlan)
	taken, _, err := live.ListenPage("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, c := range []struct{ addr, want string }{
		{"nohost", `--dashboard nohost: give host:port, such as :8080 (this machine only) or 0.0.0.0:8080 (every interface)`},
		{taken.Addr().String(), "--dashboard " + taken.Addr().String() + ": listen tcp " + taken.Addr().String() + ": bind: address already in use"},
	} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"--out", t.TempDir(), p, "--dashboard", c.addr}, &stdout, &stderr)
		if code != exitBadPlan || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("--dashboard %s: exit %d, want %d with %q:\n%s", c.addr, code, exitBadPlan, c.want, stderr.String())
		}
		if strings.Contains(stderr.String(), "step 1") {
			t.Errorf("--dashboard %s: the run started:\n%s", c.addr, stderr.String())
		}
	}
}

// eventProxy stands between Chromium and the live page: it passes the
// page through, and the event stream message by message, handing each
// model to last; once last says true, it ends the stream after that
// message and answers any other stream 204 (an EventSource then stops).
// A stream that had no such model within a minute fails the test and is
// ended as well.
func eventProxy(t *testing.T, base string, last func(reporters.HTMLModel) bool) string {
	t.Helper()
	var mu sync.Mutex
	ended := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		over := ended
		mu.Unlock()
		if r.URL.Path == live.EventsPath && over {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.Path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		if r.URL.Path != live.EventsPath {
			_, _ = io.Copy(w, resp.Body)
			return
		}
		giveUp := time.AfterFunc(time.Minute, func() {
			t.Errorf("no model of the stream was the one awaited within a minute")
			mu.Lock()
			ended = true
			mu.Unlock()
			resp.Body.Close()
		})
		defer giveUp.Stop()
		rd := bufio.NewReaderSize(resp.Body, 1<<20)
		var msg bytes.Buffer
		for {
			line, err := rd.ReadBytes('\n')
			msg.Write(line)
			if err != nil {
				return
			}
			if len(bytes.TrimSpace(line)) > 0 {
				continue
			}
			_, _ = w.Write(msg.Bytes())
			w.(http.Flusher).Flush()
			var data []byte
			for _, l := range bytes.Split(msg.Bytes(), []byte("\n")) {
				if d, ok := bytes.CutPrefix(l, []byte("data: ")); ok {
					data = append(data, d...)
				}
			}
			msg.Reset()
			if data == nil {
				continue
			}
			var m reporters.HTMLModel
			if err := json.Unmarshal(data, &m); err != nil {
				t.Errorf("a message of the stream is not a model: %v", err)
				return
			}
			if last(m) {
				mu.Lock()
				ended = true
				mu.Unlock()
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// awaitMatch waits until out holds re's match and returns its first
// group; the run ending first fails the test.
func awaitMatch(t *testing.T, out *syncBuffer, re *regexp.Regexp, exit chan int) string {
	t.Helper()
	end := time.Now().Add(time.Minute)
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-exit:
			exit <- code
			t.Fatalf("the run ended (exit %d) before printing %s:\n%s", code, re, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatalf("no %s in the output after a minute:\n%s", re, out.String())
		}
	}
}

// syncBuffer is a buffer written by the run and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
