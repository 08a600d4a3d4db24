package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planrun/planrun/cluster/certs"
	_ "github.com/planrun/planrun/drivers/memory"
	_ "github.com/planrun/planrun/steps"
)

const joinPlan = `name: join
targets:
  mem: { driver: memory }
workloads:
  producer:
    produce: { topic: t, rate: 10, count: 10 }
steps:
  - start: producer
`

// syncBuffer is a log both the worker's goroutines and the test use.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// certDir writes a fresh certificate set and returns its files.
func certDir(t *testing.T, o certs.Options) (worker, conductor TLSFiles) {
	t.Helper()
	set, err := certs.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := set.Write(dir); err != nil {
		t.Fatal(err)
	}
	p := func(n string) string { return filepath.Join(dir, n) }
	return TLSFiles{Cert: p(certs.WorkerCertFile), Key: p(certs.WorkerKeyFile), CA: p(certs.CAFile)},
		TLSFiles{Cert: p(certs.ConductorCertFile), Key: p(certs.ConductorKeyFile), CA: p(certs.CAFile)}
}

func mustTLS(t *testing.T, fn func(TLSFiles) (*tls.Config, error), f TLSFiles) *tls.Config {
	t.Helper()
	c, err := fn(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serve starts w on a loopback listener (wrapped by wrap when given) and
// returns its address; the worker stops with the test.
func serve(t *testing.T, w *Worker, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if wrap != nil {
		ln = wrap(ln)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	return addr
}

// join joins one worker and returns the error, after closing the fleet.
func join(t *testing.T, addr, token string, tc *tls.Config) error {
	t.Helper()
	c := &Conductor{Addrs: []string{addr}, Token: token, Version: "v", File: "join.yaml", Source: []byte(joinPlan), TLS: tc}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.Join(ctx)
	if err == nil {
		c.Close()
	}
	return err
}

// waitLog waits until the worker's log holds want (it is written by the
// worker's connection goroutine, after the conductor's error came back).
func waitLog(t *testing.T, log *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("worker log %q does not hold %q", log.String(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTLSHandshake(t *testing.T) {
	wf, cf := certDir(t, certs.Options{})
	otherW, otherC := certDir(t, certs.Options{})
	foreignCert := mustTLS(t, ConductorTLS, TLSFiles{Cert: otherC.Cert, Key: otherC.Key, CA: cf.CA})
	// A client offers only a certificate of a CA the server named; one
	// that sends its certificate anyway meets the worker's verification.
	pushy := foreignCert.Clone()
	pushy.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreignCert.Certificates[0], nil }
	noClientCert := mustTLS(t, ConductorTLS, cf)
	noClientCert.Certificates = nil
	renamed := cf
	renamed.ServerName = "worker.example"
	for _, tc := range []struct {
		name      string
		worker    TLSFiles
		conductor *tls.Config
		// wantErr is in the conductor's error, wantLog in the worker's log
		// (empty: the join succeeds).
		wantErr, wantLog string
	}{
		{name: "right certificates", worker: wf, conductor: mustTLS(t, ConductorTLS, cf)},
		{name: "worker certificate from another CA", worker: otherW, conductor: mustTLS(t, ConductorTLS, cf),
			wantErr: "the worker's certificate is not signed by the CA in --tls-ca", wantLog: "refused"},
		{name: "conductor certificate from another CA", worker: wf, conductor: foreignCert,
			wantErr: "the worker requires a client certificate signed by its --tls-ca, and the conductor's --tls-cert is not",
			wantLog: "the conductor presented no certificate signed by this worker's --tls-ca"},
		{name: "conductor certificate from another CA, sent anyway", worker: wf, conductor: pushy,
			wantErr: "the worker did not accept the conductor's certificate", wantLog: "not signed by this worker's --tls-ca"},
		{name: "wrong server name", worker: wf, conductor: mustTLS(t, ConductorTLS, renamed),
			wantErr: `the worker's certificate is not for the name "worker.example"`, wantLog: "refused"},
		{name: "no client certificate", worker: wf, conductor: noClientCert,
			wantErr: "the worker requires the conductor's client certificate: give --tls-cert and --tls-key", wantLog: "the conductor presented no certificate"},
		{name: "worker certificate as the conductor's", worker: wf, conductor: mustTLS(t, ConductorTLS, wf),
			wantErr: "the worker did not accept the conductor's certificate: it must be a client certificate", wantLog: "refused"},
		{name: "conductor without TLS", worker: wf, conductor: nil,
			wantErr: "if it was started with --tls-cert, --tls-key and --tls-ca, give the conductor its own", wantLog: "the conductor does not speak TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &syncBuffer{}
			w := &Worker{Version: "v", Out: log, TLS: mustTLS(t, WorkerTLS, tc.worker)}
			addr := serve(t, w, nil)
			err := join(t, addr, "", tc.conductor)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("join: %v", err)
				}
				waitLog(t, log, "joined with plan join")
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "worker 0 ("+addr+")") {
				t.Fatalf("join error %v: want it to name the worker and say %q", err, tc.wantErr)
			}
			waitLog(t, log, tc.wantLog)
			if strings.Contains(log.String(), "joined") {
				t.Errorf("the worker let the conductor join: %s", log)
			}
		})
	}
}

func TestTLSWorkerWithoutTLS(t *testing.T) {
	_, cf := certDir(t, certs.Options{})
	w := &Worker{Version: "v", Out: &syncBuffer{}}
	addr := serve(t, w, nil)
	err := join(t, addr, "", mustTLS(t, ConductorTLS, cf))
	if err == nil || !strings.Contains(err.Error(), "TLS handshake") || !strings.Contains(err.Error(), "worker 0 ("+addr+")") {
		t.Fatalf("join error %v: want a failed TLS handshake naming the worker", err)
	}
}

func TestTokenMismatch(t *testing.T) {
	wf, cf := certDir(t, certs.Options{})
	for _, tc := range []struct {
		name, worker, conductor string
		wantErr, wantLog        string
	}{
		{name: "same token", worker: "s3cret", conductor: "s3cret"},
		{name: "no token on either side", worker: "", conductor: ""},
		{name: "token on the worker only", worker: "s3cret", conductor: "",
			wantErr: "the worker requires a token and the conductor sent none; give the conductor the worker's token with --token or PLANRUN_TOKEN",
			wantLog: "it sent no token and this worker requires one"},
		{name: "token on the conductor only", worker: "", conductor: "s3cret",
			wantErr: "the conductor sent a token and the worker has none; start the worker with the same --token (or PLANRUN_TOKEN), or run the conductor without one",
			wantLog: "it sent a token and this worker has none"},
		{name: "different tokens", worker: "s3cret", conductor: "other",
			wantErr: "the worker refused the conductor's token; give both the same --token or PLANRUN_TOKEN",
			wantLog: "wrong token"},
	} {
		for _, secure := range []bool{false, true} {
			name := tc.name + map[bool]string{false: " (plain)", true: " (TLS)"}[secure]
			t.Run(name, func(t *testing.T) {
				log := &syncBuffer{}
				w := &Worker{Version: "v", Out: log, Token: tc.worker}
				var ctc *tls.Config
				if secure {
					w.TLS, ctc = mustTLS(t, WorkerTLS, wf), mustTLS(t, ConductorTLS, cf)
				}
				addr := serve(t, w, nil)
				err := join(t, addr, tc.conductor, ctc)
				if tc.wantErr == "" {
					if err != nil {
						t.Fatalf("join: %v", err)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "worker 0 ("+addr+")") {
					t.Fatalf("join error %v: want it to name the worker and say %q", err, tc.wantErr)
				}
				waitLog(t, log, "worker: refused 127.0.0.1:")
				waitLog(t, log, tc.wantLog)
				for _, tok := range []string{tc.worker, tc.conductor} {
					if tok != "" && (strings.Contains(log.String(), tok) || strings.Contains(err.Error(), tok)) {
						t.Errorf("the token %q is in the log %q or the error %v", tok, log, err)
					}
				}
			})
		}
	}
}

// farListener reports a non-loopback address, and so do its connections,
// while it listens on loopback.
type farListener struct{ net.Listener }

var farAddr = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 10), Port: 7070}

func (l farListener) Addr() net.Addr { return farAddr }
func (l farListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return farConn{c}, nil
}

type farConn struct{ net.Conn }

func (c farConn) LocalAddr() net.Addr { return farAddr }

func TestPlainListenBeyondLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{Version: "v", Out: &syncBuffer{}}
	err = w.Serve(context.Background(), farListener{ln})
	if !errors.Is(err, ErrPlainListen) || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("Serve on a non-loopback address without TLS: %v, want a refusal naming --insecure", err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Errorf("the refused listener is still open")
	}

	// With --insecure it serves, and warns once per connection that
	// sends something (not for a port probe).
	log := &syncBuffer{}
	w = &Worker{Version: "v", Out: log, Insecure: true}
	addr := serve(t, w, func(ln net.Listener) net.Listener { return farListener{ln} })
	probe, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = probe.Close()
	for i := range 2 {
		if err := join(t, addr, "", nil); err != nil {
			t.Fatal(err)
		}
		// The worker serves the next conductor once the last one left.
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(log.String(), " left\n") <= i {
			if time.Now().After(deadline) {
				t.Fatalf("the conductor did not leave; log:\n%s", log)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if n := strings.Count(log.String(), "WARNING: conductor 127.0.0.1:"); n != 2 {
		t.Errorf("%d warnings for 2 conductors and a probe; log:\n%s", n, log)
	}
	if !strings.Contains(log.String(), "plain TCP (--insecure)") {
		t.Errorf("the warning does not say why; log:\n%s", log)
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7070": true, "[::1]:7070": true, "localhost:7070": true, "127.0.0.2:1": true,
		":7070": false, "0.0.0.0:7070": false, "[::]:7070": false, "10.0.0.11:7070": false, "worker.example:7070": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestTLSFilesIncomplete(t *testing.T) {
	wf, _ := certDir(t, certs.Options{})
	for _, f := range []TLSFiles{{Cert: wf.Cert}, {Cert: wf.Cert, Key: wf.Key}, {CA: wf.CA}} {
		if _, err := WorkerTLS(f); err == nil || !strings.Contains(err.Error(), "together") {
			t.Errorf("WorkerTLS(%+v): %v, want a demand for all three files", f, err)
		}
	}
	if _, err := WorkerTLS(TLSFiles{Cert: wf.Cert, Key: wf.CA, CA: wf.CA}); err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Errorf("a certificate as key: %v", err)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(notPEM, []byte("nothing"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ConductorTLS(TLSFiles{Cert: wf.Cert, Key: wf.Key, CA: notPEM}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a CA file without certificates: %v", err)
	}
	c := mustTLS(t, ConductorTLS, wf)
	if c.MinVersion != tls.VersionTLS13 || c.ServerName != certs.ServerName {
		t.Errorf("conductor config: min version %x, server name %q", c.MinVersion, c.ServerName)
	}
}

// tapListener records every byte its connections read and write.
type tapListener struct {
	net.Listener
	mu  sync.Mutex
	buf []byte
}

func (l *tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tapConn{Conn: c, l: l}, nil
}

func (l *tapListener) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.buf...)
}

type tapConn struct {
	net.Conn
	l *tapListener
}

func (c *tapConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.l.mu.Lock()
	c.l.buf = append(c.l.buf, b[:n]...)
	c.l.mu.Unlock()
	return n, err
}

func (c *tapConn) Write(b []byte) (int, error) {
	c.l.mu.Lock()
	c.l.buf = append(c.l.buf, b...)
	c.l.mu.Unlock()
	return c.Conn.Write(b)
}

// TestTLSHidesTokenAndPlan: what crosses the wire during a join over TLS
// holds neither the token nor the plan's text; over plain TCP it holds
// both (so the capture would see them).
func TestTLSHidesTokenAndPlan(t *testing.T) {
	wf, cf := certDir(t, certs.Options{})
	const token = "tok-4f1c9a77e2"
	for _, secure := range []bool{true, false} {
		var tap *tapListener
		w := &Worker{Version: "v", Out: &syncBuffer{}, Token: token}
		var ctc *tls.Config
		if secure {
			w.TLS, ctc = mustTLS(t, WorkerTLS, wf), mustTLS(t, ConductorTLS, cf)
		}
		addr := serve(t, w, func(ln net.Listener) net.Listener { tap = &tapListener{Listener: ln}; return tap })
		if err := join(t, addr, token, ctc); err != nil {
			t.Fatal(err)
		}
		wire := string(tap.bytes())
		if len(wire) < len(joinPlan) {
			t.Fatalf("captured %d bytes", len(wire))
		}
		for _, s := range []string{token, "produce: { topic: t, rate: 10, count: 10 }"} {
			if strings.Contains(wire, s) != !secure {
				t.Errorf("TLS %v: %q on the wire: %v", secure, s, strings.Contains(wire, s))
			}
		}
	}
}
