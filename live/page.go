package live

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/reporters"
	"github.com/planrun/planrun/results"
)

// EventsPath is where the live page's server-sent events are served.
const EventsPath = "/events"

// Page is a run's live page: GET / serves the HTML report of the run so
// far (reporters.WriteHTML), GET /events its model as server-sent events,
// one message each time the engine observes the run (once a second) and a
// last one, with live.done true, once the run has ended. Every message's
// data is a whole reporters.HTMLModel, which replaces the page's.
//
// Updates never wait for a browser: each event stream sends the latest
// model when it can, and a stream that cannot take one for WriteTimeout is
// closed.
type Page struct {
	// MaxStreams bounds the event streams open at once (default 16); a
	// page opened beyond it is answered 503 until one closes.
	MaxStreams int
	// WriteTimeout bounds writing one message to a stream (default 10s).
	WriteTimeout time.Duration
	// Heartbeat is how often an idle stream gets a comment line, so that
	// a browser gone without closing its connection is noticed (default 15s).
	Heartbeat time.Duration

	mu      sync.Mutex
	result  []byte // the latest result's JSON without its series, for GET /
	live    reporters.HTMLLive
	model   []byte // the latest model, live state included
	seq     uint64 // counts models; a stream sends each one at most once
	done    bool   // the final model is out
	streams map[*stream]struct{}
	failed  error // the last model that could not be encoded
}

type stream struct {
	wake chan struct{} // capacity 1: a new model is there
}

// Observe takes the run's state of the moment (the engine calls it about
// once a second, see engine.Observer): it makes the model here, in the
// engine's observer goroutine, and wakes the streams without waiting for
// any.
func (p *Page) Observe(l engine.Live) {
	p.publish(l.Result, reporters.HTMLLive{Progress: l.Progress})
}

// Finish publishes the final result: the page shows it with live.done
// true. Later Observe calls are ignored.
func (p *Page) Finish(res *results.Result) {
	p.publish(res, reporters.HTMLLive{Progress: []string{fmt.Sprintf("run %s", res.Status)}, Done: true})
}

func (p *Page) publish(res *results.Result, l reporters.HTMLLive) {
	p.mu.Lock()
	finished := p.done
	p.mu.Unlock()
	if finished {
		return
	}
	if l.Progress == nil {
		l.Progress = []string{}
	}
	m := reporters.NewHTMLModel(res, 0)
	m.Live = &l
	model, err := json.Marshal(m)
	var result []byte
	if err == nil {
		// The page's first model has the result without its series (the
		// model's): its event stream brings the charts at once.
		result, err = json.Marshal(m.Result)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.failed = fmt.Errorf("encoding the page's model: %w", err)
		return
	}
	if p.done {
		return
	}
	p.result, p.live, p.model, p.done = result, l, model, l.Done
	p.seq++
	for s := range p.streams {
		select {
		case s.wake <- struct{}{}:
		default: // it has not sent the previous one yet: it will send this one
		}
	}
}

// latest returns the current model and its number (0: none yet).
func (p *Page) latest() ([]byte, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.model, p.seq
}

// Streams is the number of event streams open.
func (p *Page) Streams() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.streams)
}

func (p *Page) join() (*stream, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	max := p.MaxStreams
	if max <= 0 {
		max = 16
	}
	if len(p.streams) >= max {
		return nil, false
	}
	if p.streams == nil {
		p.streams = map[*stream]struct{}{}
	}
	s := &stream{wake: make(chan struct{}, 1)}
	p.streams[s] = struct{}{}
	return s, true
}

func (p *Page) leave(s *stream) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.streams, s)
}

// Handler serves the page and its events until ctx ends: then every
// stream gets the latest model if it has not had it and is closed.
func (p *Page) Handler(ctx context.Context) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", p.servePage)
	mux.HandleFunc("GET "+EventsPath, func(w http.ResponseWriter, r *http.Request) { p.serveEvents(ctx, w, r) })
	return mux
}

func (p *Page) servePage(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	data, live, failed := p.result, p.live, p.failed
	p.mu.Unlock()
	// The page is made from the result's JSON, so that it shares nothing
	// with a run going on.
	res := &results.Result{Status: "starting"}
	if data == nil {
		live.Progress = []string{"starting: opening the targets"}
	} else if err := json.Unmarshal(data, res); err != nil {
		failed = err
	}
	if failed != nil && data == nil {
		http.Error(w, "planrun: "+failed.Error(), http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := reporters.WriteHTML(&buf, res, reporters.HTMLOptions{LiveURL: EventsPath, Live: &live}); err != nil {
		http.Error(w, "planrun: writing the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

func (p *Page) serveEvents(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	s, ok := p.join()
	if !ok {
		http.Error(w, "planrun: too many live pages open; close one and reload", http.StatusServiceUnavailable)
		return
	}
	defer p.leave(s)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	timeout := p.WriteTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	beat := p.Heartbeat
	if beat <= 0 {
		beat = 15 * time.Second
	}
	var sent uint64
	write := func(msg []byte) error {
		if err := rc.SetWriteDeadline(time.Now().Add(timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		if _, err := w.Write(msg); err != nil {
			return err
		}
		return rc.Flush()
	}
	send := func() error {
		model, seq := p.latest()
		if seq == sent {
			return nil
		}
		sent = seq
		// JSON holds no raw line break: the model is one data line.
		msg := make([]byte, 0, len(model)+32)
		msg = append(msg, "id: "...)
		msg = strconv.AppendUint(msg, seq, 10)
		msg = append(msg, "\ndata: "...)
		msg = append(msg, model...)
		msg = append(msg, "\n\n"...)
		return write(msg)
	}
	// The response starts at once, so that the browser's EventSource opens.
	if err := write([]byte(": planrun live page\n\n")); err != nil {
		return
	}
	heartbeat := time.NewTicker(beat)
	defer heartbeat.Stop()
	for {
		if err := send(); err != nil {
			return
		}
		select {
		case <-s.wake:
		case <-heartbeat.C:
			if err := write([]byte(": alive\n\n")); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-ctx.Done():
			_ = send()
			return
		}
	}
}

// ServePage serves p on ln until ctx ends; it closes ln.
func ServePage(ctx context.Context, ln net.Listener, p *Page) error {
	srv := &http.Server{Handler: p.Handler(ctx), ReadHeaderTimeout: 5 * time.Second}
	return serve(ctx, srv, ln)
}

// serve runs srv on ln until ctx ends, then gives requests in flight a
// moment to finish and closes what is left.
func serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
	}()
	err := srv.Serve(ln)
	close(done)
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ListenPage opens addr (host:port, or a port alone) for a live page. A
// missing host, as in ":8080", is 127.0.0.1 and never every interface: a
// page reachable from other hosts must name one (0.0.0.0:8080, an
// interface's address). remote reports whether the listener takes
// connections from other hosts.
func ListenPage(addr string) (ln net.Listener, remote bool, err error) {
	if _, err := strconv.ParseUint(addr, 10, 16); err == nil {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, false, errors.New("give host:port, such as :8080 (this machine only) or 0.0.0.0:8080 (every interface)")
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err = net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, false, err
	}
	ta, ok := ln.Addr().(*net.TCPAddr)
	return ln, !ok || !ta.IP.IsLoopback(), nil
}
