// Package nats is planrun's NATS driver, built on github.com/nats-io/nats.go
// and its jetstream package. Core NATS subjects are at most once: a send is
// acknowledged once the server has read it, and a subscriber gets what is
// published while it is subscribed. JetStream stores messages in streams:
// a send is acknowledged by the stream's publish ack, and durable pull or
// push consumers keep a group's position on the server. With url: embedded
// the target runs a nats-server (github.com/nats-io/nats-server/v2) in
// process, with JetStream in a temporary directory.
package nats

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/planrun/planrun/drivers"
)

func init() {
	drivers.Register("nats", Driver,
		"NATS core subjects and JetStream streams (nats-server 2.9 or later) through nats-io/nats.go; url: embedded starts nats-server with JetStream in process")
}

// Driver opens NATS targets. Committed positions and lag are JetStream's
// (durable consumers); a core subscription has neither.
var Driver = drivers.Define(open, drivers.Capabilities{
	Consume: true, Positions: true, Restart: true, Relay: true, Credentials: true, Embedded: true, Lag: true,
})

var (
	_ drivers.TargetOf[ProduceOptions, ConsumeOptions] = (*Target)(nil)
	_ drivers.Describer                                = (*Target)(nil)
	_ drivers.BrokerController                         = (*Target)(nil)
	_ drivers.LagReader                                = (*Target)(nil)
	_ drivers.SubscriptionMatcher                      = (*Target)(nil)
	_ drivers.EmbeddedConfig                           = (*TargetConfig)(nil)
)

// Target is a reachable NATS server or cluster. It holds one connection of
// its own for JetStream management (streams, consumers, lag); producers and
// consumers open their own.
type Target struct {
	cfg     TargetConfig
	url     string // what clients connect to
	tls     *tls.Config
	nc      *nats.Conn
	js      jetstream.JetStream
	version string // the server's, as it announced itself

	// srv is nil unless embedded; srvDown is set while a plan has it
	// stopped. dir is its JetStream store, removed on Close when tempDir.
	srvMu   sync.Mutex
	srv     *server.Server
	srvDown bool
	srvOpts server.Options
	dir     string
	tempDir bool

	mu      sync.Mutex
	closed  bool
	open    map[closer]struct{}
	streams map[string]string // subject -> stream, as found for lag
}

type closer interface{ Close() error }

// open starts the embedded server if asked, connects the target's own
// connection (so a wrong address or credentials show up before any
// workload starts) and creates the streams the plan declares.
func open(ctx context.Context, c *TargetConfig) (*Target, error) {
	t := &Target{cfg: *c, open: map[closer]struct{}{}, streams: map[string]string{}}
	t.url = strings.Join(c.servers(), ",")
	if c.embedded() {
		if err := t.startEmbedded(); err != nil {
			return nil, err
		}
	} else if t.isTLS() {
		tc, err := c.TLS.Load()
		if err != nil {
			return nil, fmt.Errorf("nats: %w", err)
		}
		t.tls = tc
	}
	fail := func(err error) (*Target, error) {
		if t.nc != nil {
			t.nc.Close()
		}
		t.stopEmbedded()
		return nil, err
	}
	nc, err := t.connect(ctx, "planrun-admin", nil)
	if err != nil {
		return fail(err)
	}
	t.nc = nc
	t.version = nc.ConnectedServerVersion()
	t.js, err = jetstream.New(nc)
	if err != nil {
		return fail(fmt.Errorf("nats: jetstream: %w", err))
	}
	if err := t.createStreams(ctx, true); err != nil {
		return fail(err)
	}
	return t, nil
}

func (t *Target) isTLS() bool {
	for _, s := range t.cfg.servers() {
		if strings.HasPrefix(strings.ToLower(s), "tls://") {
			return true
		}
	}
	return false
}

// startEmbedded runs a nats-server with JetStream on loopback, on a free
// port the first time and on the same one when started again.
func (t *Target) startEmbedded() error {
	if t.srvOpts.StoreDir == "" {
		t.dir = t.cfg.Dir
		if t.dir == "" {
			d, err := os.MkdirTemp("", "planrun-nats-*")
			if err != nil {
				return fmt.Errorf("nats: embedded server directory: %w", err)
			}
			t.dir, t.tempDir = d, true
		}
		t.srvOpts = server.Options{
			ServerName: "planrun-embedded",
			Host:       "127.0.0.1", Port: server.RANDOM_PORT,
			HTTPHost: "127.0.0.1", HTTPPort: server.RANDOM_PORT,
			JetStream: true, StoreDir: t.dir,
			NoLog: true, NoSigs: true,
			Username: t.cfg.Username, Password: t.cfg.Password, Authorization: t.cfg.Token,
		}
	}
	o := t.srvOpts
	s, err := server.NewServer(&o)
	if err != nil {
		t.removeDir()
		return fmt.Errorf("nats: embedded server: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		t.removeDir()
		return errors.New("nats: the embedded server did not accept connections within 30s")
	}
	t.srv = s
	// The ports stay the same across restarts.
	if a, ok := s.Addr().(*net.TCPAddr); ok {
		t.srvOpts.Port = a.Port
	}
	if a := s.MonitorAddr(); a != nil {
		t.srvOpts.HTTPPort = a.Port
	}
	t.url = s.ClientURL()
	return nil
}

func (t *Target) removeDir() {
	if t.tempDir && t.dir != "" {
		_ = os.RemoveAll(t.dir)
	}
}

func (t *Target) stopEmbedded() {
	t.srvMu.Lock()
	defer t.srvMu.Unlock()
	if t.srv != nil && !t.srvDown {
		t.srv.Shutdown()
		t.srv.WaitForShutdown()
	}
	if t.srv != nil {
		t.removeDir()
	}
}

// MonitorURL is the embedded server's monitoring endpoint (/varz, /jsz),
// or "" for an outside server.
func (t *Target) MonitorURL() string {
	t.srvMu.Lock()
	defer t.srvMu.Unlock()
	if t.srv == nil {
		return ""
	}
	return "http://127.0.0.1:" + strconv.Itoa(t.srvOpts.HTTPPort)
}

// URL is what the target's clients connect to.
func (t *Target) URL() string { return t.url }

// ServerVersion is the version the server announced.
func (t *Target) ServerVersion() string { return t.version }

var errNotEmbedded = errors.New("nats: the target does not run an embedded server (url: embedded)")

// StopBroker implements drivers.BrokerController: the embedded server
// shuts down, closing every client connection; JetStream's file store stays
// in its directory.
func (t *Target) StopBroker(context.Context) error {
	t.srvMu.Lock()
	defer t.srvMu.Unlock()
	switch {
	case t.srv == nil:
		return errNotEmbedded
	case t.srvDown:
		return errors.New("nats: the embedded server is already stopped")
	}
	t.srvDown = true
	t.srv.Shutdown()
	t.srv.WaitForShutdown()
	return nil
}

// StartBroker implements drivers.BrokerController: a new server listens on
// the stopped one's ports and recovers the file-storage streams and their
// consumers from the directory; streams of memory storage the plan declares
// are created again, empty.
func (t *Target) StartBroker(ctx context.Context) error {
	t.srvMu.Lock()
	switch {
	case t.srv == nil:
		t.srvMu.Unlock()
		return errNotEmbedded
	case !t.srvDown:
		t.srvMu.Unlock()
		return errors.New("nats: the embedded server is already running")
	}
	err := t.startEmbedded()
	if err == nil {
		t.srvDown = false
	}
	t.srvMu.Unlock()
	if err != nil {
		return err
	}
	// The target's own connection comes back by itself; wait for it to
	// put back what a restart loses.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !t.nc.IsConnected() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("nats: waiting for the connection to the restarted server: %w", ctx.Err())
		case <-tick.C:
		}
	}
	return t.createStreams(ctx, false)
}

// Describe implements drivers.Describer.
func (t *Target) Describe() string {
	var extra []string
	if t.MonitorURL() != "" {
		extra = append(extra, "embedded")
	}
	extra = append(extra, "nats-server "+t.version)
	if t.nc != nil && t.nc.ConnectedServerName() != "" && t.MonitorURL() == "" {
		extra = append(extra, "server "+t.nc.ConnectedServerName())
	}
	if t.tls != nil {
		extra = append(extra, "tls")
	}
	if t.cfg.Username != "" {
		extra = append(extra, "user "+t.cfg.Username)
	}
	if n := len(t.cfg.Streams); n > 0 {
		extra = append(extra, fmt.Sprintf("%d streams", n))
	}
	return "nats " + t.url + " (" + strings.Join(extra, ", ") + ")"
}

// connect opens a client connection whose losses and returns are events
// of sink. It retries lost connections for as long as it is open, and
// buffers nothing while it is away: a publish then fails at once instead of
// being sent, or not, later.
func (t *Target) connect(ctx context.Context, name string, sink drivers.EventSink) (*nats.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.Timeout(orDefault(t.cfg.ConnectTimeout, defaultConnectTimeout)),
		nats.ReconnectWait(orDefault(t.cfg.ReconnectWait, defaultReconnectWait)),
		nats.MaxReconnects(-1),
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if c.IsClosed() {
				return // closed by planrun
			}
			r := drivers.Reason(err)
			if r == "" {
				r = "connection closed"
			}
			drivers.Emit(sink, drivers.Event{Kind: drivers.Disconnected, Reason: r})
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			drivers.Emit(sink, drivers.Event{Kind: drivers.Reconnected})
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			r := drivers.Reason(err)
			if errors.Is(err, nats.ErrSlowConsumer) {
				r = "slow consumer"
			}
			drivers.Emit(sink, drivers.Event{Kind: drivers.ReceiveError, Reason: r})
		}),
	}
	switch {
	case t.cfg.Token != "":
		opts = append(opts, nats.Token(t.cfg.Token))
	case t.cfg.Username != "":
		opts = append(opts, nats.UserInfo(t.cfg.Username, t.cfg.Password))
	}
	if t.cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(t.cfg.CredsFile))
	}
	if t.tls != nil {
		opts = append(opts, nats.Secure(t.tls))
	}
	if t.cfg.Routed() {
		// Every server address, also those the cluster announces, is
		// dialed through the target's proxy; TLS checks the server's own
		// name (nats.go takes it from the URL).
		d := &net.Dialer{Timeout: orDefault(t.cfg.ConnectTimeout, defaultConnectTimeout)}
		opts = append(opts, nats.SetCustomDialer(t.cfg.Dialer(d)))
	}
	nc, err := nats.Connect(t.url, opts...)
	if err != nil {
		return nil, connectError(t.url, err)
	}
	return nc, nil
}

// connectError phrases a failed connection so the fix is plain.
func connectError(url string, err error) error {
	switch {
	case errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization"):
		return fmt.Errorf("nats: connect to %s: the server refused the credentials (check username and password, token or creds_file): %w", url, err)
	case errors.Is(err, nats.ErrNoServers) || drivers.Reason(err) == "connection refused":
		return fmt.Errorf("nats: connect to %s: connection refused; is nats-server running there? (%w)", url, err)
	}
	return fmt.Errorf("nats: connect to %s: %w", url, err)
}

// atLeast reports whether the server's version is major.minor or later.
func (t *Target) atLeast(major, minor int) bool {
	v := strings.TrimPrefix(t.version, "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return true // unknown: let the server decide
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return true
	}
	return ma > major || ma == major && mi >= minor
}

// needs refuses a feature the server is too old for, by name.
func (t *Target) needs(feature string, major, minor int) error {
	if t.atLeast(major, minor) {
		return nil
	}
	return fmt.Errorf("nats: %s needs nats-server %d.%d or later; %s runs %s", feature, major, minor, t.url, t.version)
}

// createStreams creates or updates the streams the plan declares; first
// is the target's opening, when streams asked to be purged are.
func (t *Target) createStreams(ctx context.Context, first bool) error {
	for name, s := range t.cfg.Streams {
		sc := jetstream.StreamConfig{Name: name, Subjects: s.Subjects, Replicas: max(s.Replicas, 1),
			MaxMsgs: -1, MaxBytes: -1, MaxAge: s.MaxAge, MaxMsgsPerSubject: -1}
		if len(sc.Subjects) == 0 {
			sc.Subjects = []string{name}
		}
		if s.MaxMsgs > 0 {
			sc.MaxMsgs = s.MaxMsgs
		}
		if s.MaxBytes > 0 {
			sc.MaxBytes = int64(s.MaxBytes)
		}
		if s.Storage == "memory" {
			sc.Storage = jetstream.MemoryStorage
		}
		switch s.Retention {
		case "interest":
			sc.Retention = jetstream.InterestPolicy
		case "workqueue":
			sc.Retention = jetstream.WorkQueuePolicy
		}
		if s.Discard == "new" {
			sc.Discard = jetstream.DiscardNew
		}
		if s.Compression == "s2" {
			if err := t.needs("stream "+name+": compression: s2", 2, 10); err != nil {
				return err
			}
			sc.Compression = jetstream.S2Compression
		}
		st, err := t.js.CreateOrUpdateStream(ctx, sc)
		if err != nil {
			return fmt.Errorf("nats: create stream %s: %w", name, jsError(err))
		}
		if first && s.Purge {
			if err := st.Purge(ctx); err != nil {
				return fmt.Errorf("nats: purge stream %s: %w", name, err)
			}
		}
	}
	return nil
}

// jsError explains the JetStream errors a plan can cause.
func jsError(err error) error {
	switch {
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return fmt.Errorf("JetStream is not enabled on the server (start nats-server with -js): %w", err)
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("no JetStream answered (is JetStream enabled, -js?): %w", err)
	}
	return err
}

// streamFor finds the stream that stores subject (or checks the named one).
func (t *Target) streamFor(ctx context.Context, subject, named string) (string, error) {
	if named != "" {
		if _, err := t.js.Stream(ctx, named); err != nil {
			return "", fmt.Errorf("nats: stream %s: %w", named, jsError(err))
		}
		return named, nil
	}
	t.mu.Lock()
	s, ok := t.streams[subject]
	t.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := t.js.StreamNameBySubject(ctx, subject)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return "", fmt.Errorf("nats: no stream stores subject %s; declare one under the target's streams: (with subjects: [%s]) or name the stream in the consume section (stream: NAME)", subject, subject)
		}
		return "", fmt.Errorf("nats: stream of subject %s: %w", subject, jsError(err))
	}
	t.mu.Lock()
	t.streams[subject] = s
	t.mu.Unlock()
	return s, nil
}

// durableName is a group's JetStream consumer name: what the server
// refuses in names becomes _.
func durableName(group string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '.', '*', '>', ' ', '\t', '\r', '\n', '/', '\\':
			return '_'
		}
		return r
	}, group)
}

// Lag implements drivers.LagReader: for the group's durable JetStream
// consumer, the messages of its subjects it has not acknowledged yet: those
// not delivered (num_pending) and those delivered and awaiting their ack
// (num_ack_pending). A core subscription has no lag (an error here).
func (t *Target) Lag(ctx context.Context, topic, group string) (int64, error) {
	stream, err := t.streamFor(ctx, topic, "")
	if err != nil {
		return 0, err
	}
	ci, err := t.consumerInfo(ctx, stream, durableName(group))
	if err != nil {
		return 0, fmt.Errorf("nats: consumer %s of stream %s: %w", durableName(group), stream, err)
	}
	return int64(ci.NumPending) + int64(ci.NumAckPending), nil
}

// Matcher implements drivers.SubscriptionMatcher: NATS subject matching
// (* one token, > the rest), over the consumer's filter subjects when it
// has several.
func (t *Target) Matcher(spec drivers.ConsumerSpec) func(subject string) bool {
	filters := []string{spec.Topic}
	if o, ok := spec.Options.(*ConsumeOptions); ok && o.JetStream && len(o.FilterSubjects) > 0 {
		filters = o.FilterSubjects
	}
	split := make([][]string, len(filters))
	for i, f := range filters {
		split[i] = strings.Split(f, ".")
	}
	return func(subject string) bool {
		for _, f := range split {
			if SubjectMatches(f, subject) {
				return true
			}
		}
		return false
	}
}

// SubjectMatches reports whether a subject matches a filter split into
// tokens, by NATS rules: * matches one token, > one or more to the end.
func SubjectMatches(filter []string, subject string) bool {
	for i, f := range filter {
		if subject == "" {
			return false
		}
		if f == ">" {
			return i == len(filter)-1
		}
		tok, rest, more := strings.Cut(subject, ".")
		if f != "*" && f != tok {
			return false
		}
		if !more {
			return i == len(filter)-1
		}
		subject = rest
	}
	return false
}

func (t *Target) track(c closer) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("nats: target is closed")
	}
	t.open[c] = struct{}{}
	return nil
}

func (t *Target) untrack(c closer) {
	t.mu.Lock()
	delete(t.open, c)
	t.mu.Unlock()
}

// Close implements drivers.TargetOf: it closes what workloads left open,
// its own connection, and stops the embedded server.
func (t *Target) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	left := make([]closer, 0, len(t.open))
	for c := range t.open {
		left = append(left, c)
	}
	t.mu.Unlock()
	for _, c := range left {
		_ = c.Close()
	}
	t.nc.Close()
	t.stopEmbedded()
	return nil
}

// counter is a gauge kept by a producer or consumer.
type counter = atomic.Int64

// consumerInfo asks the server about a pull or push consumer
// (jetstream.Consumer is for pull consumers only).
func (t *Target) consumerInfo(ctx context.Context, stream, name string) (*jetstream.ConsumerInfo, error) {
	msg, err := t.nc.RequestWithContext(ctx, "$JS.API.CONSUMER.INFO."+stream+"."+name, nil)
	if err != nil {
		return nil, jsError(err)
	}
	var resp struct {
		jetstream.ConsumerInfo
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("consumer info: %w", err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeConsumerNotFound {
			return nil, jetstream.ErrConsumerNotFound
		}
		return nil, resp.Error
	}
	return &resp.ConsumerInfo, nil
}
