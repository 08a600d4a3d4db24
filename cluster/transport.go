package cluster

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/rpc"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/planrun/planrun/cluster/certs"
)

// The control channel's transport: TLS 1.3 with certificates on both
// sides when configured, plain TCP otherwise (loopback, or a worker told
// --insecure). What is sent over it does not depend on which.

// TLSFiles are the PEM files one side of the control channel presents and
// trusts (--tls-cert, --tls-key, --tls-ca), and the name the conductor
// expects in workers' certificates (--tls-server-name).
type TLSFiles struct {
	Cert, Key, CA string
	ServerName    string
}

// Given reports whether any file is named.
func (f TLSFiles) Given() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

func (f TLSFiles) load() (tls.Certificate, *x509.CertPool, error) {
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return tls.Certificate{}, nil, errors.New("give --tls-cert, --tls-key and --tls-ca together (planrun certs DIR makes them)")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", f.Cert, f.Key, err)
	}
	data, err := os.ReadFile(f.CA)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("--tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return tls.Certificate{}, nil, fmt.Errorf("--tls-ca %s holds no PEM certificate", f.CA)
	}
	return cert, pool, nil
}

// WorkerTLS is a worker's TLS configuration: it presents its certificate
// and requires a client certificate the CA signed from every conductor.
func WorkerTLS(f TLSFiles) (*tls.Config, error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}, nil
}

// ConductorTLS is the conductor's TLS configuration: it presents its
// client certificate and accepts a worker whose certificate the CA signed
// for ServerName (default certs.ServerName), whatever address it was
// dialled at.
func ConductorTLS(f TLSFiles) (*tls.Config, error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	name := f.ServerName
	if name == "" {
		name = certs.ServerName
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		RootCAs: pool, ServerName: name}, nil
}

// Loopback reports whether a listen or dial address (host:port) stays on
// this machine: a loopback IP or localhost. An empty host (all
// interfaces) and any other name are not.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ErrPlainListen is the refusal of a plain listener beyond loopback.
var ErrPlainListen = errors.New("refusing to listen beyond loopback without TLS: the plan, its secrets and the token would cross the network readable; " +
	"give --tls-cert, --tls-key and --tls-ca (planrun certs DIR makes them), or --insecure to accept that")

// checkListener refuses a plain listener beyond loopback unless the
// worker is told Insecure.
func (w *Worker) checkListener(ln net.Listener) error {
	if w.TLS != nil || w.Insecure || Loopback(ln.Addr().String()) {
		return nil
	}
	return fmt.Errorf("%s: %w", ln.Addr(), ErrPlainListen)
}

// handshakeTimeout bounds a conductor's TLS handshake on the worker.
const handshakeTimeout = 10 * time.Second

// secure returns the connection the worker serves a conductor on: TLS
// after a handshake that verified the conductor's certificate, or the
// plain connection (with a warning on its first bytes beyond loopback).
// A failed handshake is logged, unless the peer sent nothing (a port
// probe), and the connection closed.
func (w *Worker) secure(ctx context.Context, conn net.Conn) (net.Conn, bool) {
	remote := conn.RemoteAddr().String()
	if w.TLS == nil {
		if Loopback(conn.LocalAddr().String()) {
			return conn, true
		}
		return &firstRead{Conn: conn, fn: func() {
			w.logf("worker: WARNING: conductor %s on plain TCP (--insecure): the plan, its secrets and the token cross the network readable; give --tls-cert, --tls-key and --tls-ca", remote)
		}}, true
	}
	tc := tls.Server(conn, w.TLS)
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = conn.Close()
		if !closedByPeer(err) {
			w.logf("worker: refused %s: TLS handshake: %v%s", remote, err, workerHint(err))
		}
		return nil, false
	}
	return tc, true
}

// workerHint says what a failed handshake on the worker most likely means.
func workerHint(err error) string {
	var rh tls.RecordHeaderError
	var unknown x509.UnknownAuthorityError
	switch {
	case errors.As(err, &rh):
		return " (the conductor does not speak TLS: give it --tls-cert, --tls-key and --tls-ca)"
	case strings.Contains(err.Error(), "didn't provide a certificate"):
		return " (the conductor presented no certificate signed by this worker's --tls-ca: give it --tls-cert and --tls-key from the same planrun certs folder)"
	case errors.As(err, &unknown):
		return " (the conductor's certificate is not signed by this worker's --tls-ca)"
	}
	return ""
}

// firstRead calls fn once, when the first bytes arrive: a port probe that
// sends nothing does not count as a conductor.
type firstRead struct {
	net.Conn
	once sync.Once
	fn   func()
}

func (c *firstRead) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.once.Do(c.fn)
	}
	return n, err
}

// secure wraps the conductor's connection to a worker in TLS and completes
// the handshake, or warns once when the channel to a worker beyond
// loopback is plain. The connection it returns remembers why reading
// failed, for joinError.
func (c *Conductor) secure(ctx context.Context, conn net.Conn, addr string) (net.Conn, error) {
	if c.TLS == nil {
		if !Loopback(addr) && c.Out != nil {
			fmt.Fprintf(c.Out, "warning: the control channel to %s is plain TCP: the plan, its secrets and the token cross the network readable (give --tls-cert, --tls-key and --tls-ca)\n", addr)
		}
		return &readErrConn{Conn: conn}, nil
	}
	tc := tls.Client(conn, c.TLS)
	hctx, cancel := context.WithTimeout(ctx, c.CallTimeout+handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		return nil, fmt.Errorf("TLS handshake: %w", explainTLS(err, c.TLS))
	}
	return &readErrConn{Conn: tc}, nil
}

// joinError explains why the join call on conn failed: with TLS 1.3 a
// worker refuses the conductor's certificate after the conductor's side of
// the handshake ended, so the refusal arrives as the first read's error,
// which net/rpc may have replaced by its own.
func (c *Conductor) joinError(err error, conn net.Conn) error {
	if rc, ok := conn.(*readErrConn); ok {
		if rerr := rc.readErr(); rerr != nil && !errors.Is(rerr, net.ErrClosed) && (errors.Is(err, rpc.ErrShutdown) || errors.Is(err, io.ErrUnexpectedEOF)) {
			err = rerr
		}
	}
	if c.TLS != nil {
		return explainTLS(err, c.TLS)
	}
	return plainHint(err)
}

// readErrConn remembers the first error a read returned.
type readErrConn struct {
	net.Conn
	mu  sync.Mutex
	err error
}

func (c *readErrConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.mu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *readErrConn) readErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// tlsHint explains a TLS failure the conductor saw, naming the fix.
type tlsHint struct {
	err  error
	hint string
}

func (e *tlsHint) Error() string { return e.err.Error() + " (" + e.hint + ")" }
func (e *tlsHint) Unwrap() error { return e.err }

// explainTLS adds to err what it most likely means and how to fix it;
// other errors come back as they are. It serves both the handshake and
// the first call, where TLS 1.3 reports a worker's refusal of the
// conductor's certificate.
func explainTLS(err error, cfg *tls.Config) error {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var op *net.OpError
	var rh tls.RecordHeaderError
	hint := ""
	switch {
	case errors.As(err, &unknown):
		hint = "the worker's certificate is not signed by the CA in --tls-ca: give both sides certificates from one planrun certs folder"
	case errors.As(err, &host):
		hint = fmt.Sprintf("the worker's certificate is not for the name %q: make it with planrun certs, or give --tls-server-name with a name it holds", cfg.ServerName)
	case errors.As(err, &invalid):
		hint = "the worker's certificate is expired, not yet valid or not a server certificate: make new ones with planrun certs"
	case errors.As(err, &rh):
		hint = "the worker does not speak TLS: start it with --tls-cert, --tls-key and --tls-ca, or run the conductor without them"
	case errors.As(err, &op) && op.Op == "remote error":
		// The worker's alert (TLS 1.3 sends it after the conductor's side
		// of the handshake, so it arrives with the first call).
		switch msg := op.Err.Error(); {
		case strings.Contains(msg, "certificate required") && len(cfg.Certificates) == 0:
			hint = "the worker requires the conductor's client certificate: give --tls-cert and --tls-key"
		case strings.Contains(msg, "certificate required"):
			// The worker named its CA and the conductor had no
			// certificate signed by it to offer.
			hint = "the worker requires a client certificate signed by its --tls-ca, and the conductor's --tls-cert is not: give both sides certificates from one planrun certs folder"
		case strings.Contains(msg, "certificate"):
			hint = "the worker did not accept the conductor's certificate: it must be a client certificate signed by the CA the worker was given with --tls-ca"
		default:
			return err
		}
	case closedByPeer(err):
		hint = "the worker closed the connection during the TLS handshake: is it started with --tls-cert, --tls-key and --tls-ca? Its log says why"
	default:
		return err
	}
	return &tlsHint{err: err, hint: hint}
}

// plainHint explains a call the worker ended by closing the connection,
// when the conductor speaks plain TCP: a worker with TLS does that.
func plainHint(err error) error {
	if err == nil || !(closedByPeer(err) || errors.Is(err, rpc.ErrShutdown)) {
		return err
	}
	return &tlsHint{err: err, hint: "the worker closed the connection: if it was started with --tls-cert, --tls-key and --tls-ca, give the conductor its own with the same CA"}
}

// checkToken compares the token a conductor sent with the worker's, in
// constant time. Both must have the same one, or neither: a token on one
// side only is a mistake in the command lines and is refused, with the
// fix in the worker's log and in the error the conductor reports.
func (w *Worker) checkToken(sent, remote string) error {
	switch {
	case w.Token == "" && sent == "":
		return nil
	case w.Token == "":
		w.logf("worker: refused %s: it sent a token and this worker has none (start the worker with the same --token or PLANRUN_TOKEN)", remote)
		return errors.New("token mismatch: the conductor sent a token and the worker has none; start the worker with the same --token (or PLANRUN_TOKEN), or run the conductor without one")
	case sent == "":
		w.logf("worker: refused %s: it sent no token and this worker requires one (give the conductor this worker's --token or PLANRUN_TOKEN)", remote)
		return errors.New("token mismatch: the worker requires a token and the conductor sent none; give the conductor the worker's token with --token or PLANRUN_TOKEN")
	case subtle.ConstantTimeCompare([]byte(sent), []byte(w.Token)) != 1:
		w.logf("worker: refused %s: wrong token (give the conductor this worker's --token or PLANRUN_TOKEN)", remote)
		return errors.New("token mismatch: the worker refused the conductor's token; give both the same --token or PLANRUN_TOKEN")
	}
	return nil
}

// closedByPeer reports an error of a connection the other side closed
// (a reset when it left data unread).
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
