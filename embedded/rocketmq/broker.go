// Package rocketmq runs an in-process RocketMQ name server and a single broker
// that speak the RocketMQ remoting protocol, so the real clients (for example
// github.com/apache/rocketmq-client-go/v2) can produce and consume against a
// laptop without a RocketMQ installation.
//
// Messages are appended to one commit log file in the RocketMQ record layout;
// only a 12-byte-per-message index is held in memory, so backlogs live on
// disk. Supported: sync/oneway/batch sends, push and pull consumers with long
// polling, consumer groups with rebalancing notifications, broker-side
// consumer offsets, TAG filtering, orderly-consumption queue locks, retries
// through %RETRY% topics with delay levels, dead-letter topics, delayed
// messages, transactional commit/rollback (without check-back) and ACL
// signatures. Not supported: SQL92 filtering, message query by key, timer
// (TIMER_DELIVER_MS) messages, replication and log cleanup.
package rocketmq

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const (
	clusterName = "DefaultCluster"
	brokerName  = "broker-a"

	defaultQueues = 8
	housekeeping  = 5 * time.Second
)

// Options configures Start.
type Options struct {
	// Dir holds the commit log, topic table and consumer offsets; an existing
	// directory is recovered. "" means a new temporary directory that Close
	// removes.
	Dir string
	// AccessKey turns ACL on: every broker request must be signed with
	// SecretKey. Route lookups on the name server are not checked, as in
	// Apache RocketMQ 4.x, so a bad key surfaces as a clear send/pull error.
	AccessKey string
	SecretKey string
	// DefaultQueues is the queue count of auto-created topics (default 8).
	// Retry and dead-letter topics always get one queue.
	DefaultQueues int
	// NameServerListen and BrokerListen are the listen addresses; ""
	// means a free loopback port. A broker started again on the addresses
	// of a stopped one, with its Dir, is that broker restarted: clients
	// find it where it was, with everything it had stored.
	NameServerListen, BrokerListen string
	// Logf receives debug logging; nil means silent.
	Logf func(format string, args ...any)
}

// Broker is a running name server plus broker.
type Broker struct {
	opts    Options
	dir     string
	tempDir bool
	logf    func(string, ...any)

	nsLn, brLn net.Listener
	store      *store
	consumers  *consumerManager
	parks      parkTable
	storeHost  [8]byte

	done      chan struct{}
	wg        sync.WaitGroup
	connMu    sync.Mutex
	conns     map[*conn]struct{}
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

type handlerFunc func(c *conn, req *command) *command

// Start listens on two loopback ports (name server and broker) and serves
// until Close. ctx only bounds start-up.
func Start(ctx context.Context, opts Options) (*Broker, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opts.DefaultQueues <= 0 {
		opts.DefaultQueues = defaultQueues
	}
	if opts.DefaultQueues > maxQueuesPerTopic {
		return nil, fmt.Errorf("rocketmq: DefaultQueues %d exceeds %d", opts.DefaultQueues, maxQueuesPerTopic)
	}
	if opts.AccessKey != "" && opts.SecretKey == "" {
		return nil, errors.New("rocketmq: AccessKey set without SecretKey")
	}
	b := &Broker{
		opts:      opts,
		logf:      opts.Logf,
		consumers: newConsumerManager(),
		done:      make(chan struct{}),
		conns:     make(map[*conn]struct{}),
	}
	if b.logf == nil {
		b.logf = func(string, ...any) {}
	}
	var err error
	if opts.Dir == "" {
		if b.dir, err = os.MkdirTemp("", "planrun-rocketmq-*"); err != nil {
			return nil, err
		}
		b.tempDir = true
	} else {
		if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
			return nil, err
		}
		b.dir = opts.Dir
	}
	fail := func(err error) (*Broker, error) {
		for _, ln := range []net.Listener{b.nsLn, b.brLn} {
			if ln != nil {
				_ = ln.Close()
			}
		}
		if b.store != nil {
			_ = b.store.close(false)
		}
		if b.tempDir {
			_ = os.RemoveAll(b.dir)
		}
		return nil, fmt.Errorf("rocketmq: %w", err)
	}
	var lc net.ListenConfig
	listen := func(addr string) (net.Listener, error) {
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		return lc.Listen(ctx, "tcp4", addr)
	}
	if b.nsLn, err = listen(opts.NameServerListen); err != nil {
		return fail(err)
	}
	if b.brLn, err = listen(opts.BrokerListen); err != nil {
		return fail(err)
	}
	addr := b.brLn.Addr().(*net.TCPAddr)
	copy(b.storeHost[:4], addr.IP.To4())
	b.storeHost[4] = byte(addr.Port >> 24)
	b.storeHost[5] = byte(addr.Port >> 16)
	b.storeHost[6] = byte(addr.Port >> 8)
	b.storeHost[7] = byte(addr.Port)
	if b.store, err = openStore(b.dir, b.storeHost, b.logf); err != nil {
		return fail(err)
	}
	if err := b.store.setQueues(scheduleTopic, len(delayLevels)); err != nil {
		return fail(err)
	}

	b.wg.Add(4)
	go b.acceptLoop(b.nsLn, b.nameServerHandler)
	go b.acceptLoop(b.brLn, b.brokerHandler)
	go b.scheduleLoop()
	go b.housekeepingLoop()
	return b, nil
}

// NameServerAddr is the name server address, for WithNsResolver.
func (b *Broker) NameServerAddr() string { return b.nsLn.Addr().String() }

// BrokerAddr is the broker address announced in routes.
func (b *Broker) BrokerAddr() string { return b.brLn.Addr().String() }

// CreateTopic creates a topic or changes its queue count.
func (b *Broker) CreateTopic(topic string, queues int) error {
	if err := b.store.setQueues(topic, queues); err != nil {
		return fmt.Errorf("rocketmq: %w", err)
	}
	return nil
}

// MaxOffset is the number of messages stored in a queue (0 if unknown).
func (b *Broker) MaxOffset(topic string, queue int) int64 {
	if td := b.store.topic(topic); td != nil {
		if q := td.queue(queue); q != nil {
			return q.maxOffset()
		}
	}
	return 0
}

// ConsumerOffset is the group's committed offset for a queue, -1 if none.
func (b *Broker) ConsumerOffset(group, topic string, queue int) int64 {
	if off, ok := b.store.consumerOffset(offsetKey{group, topic, queue}); ok {
		return off
	}
	return -1
}

// Close stops the listeners, closes connections, waits for every goroutine,
// persists metadata (or removes the temporary directory).
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		close(b.done)
		errs := []error{}
		for _, ln := range []net.Listener{b.nsLn, b.brLn} {
			if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, err)
			}
		}
		b.connMu.Lock()
		b.closed = true
		for c := range b.conns {
			c.close()
		}
		b.connMu.Unlock()
		b.wg.Wait()
		if !b.tempDir {
			errs = append(errs, b.store.saveMeta())
		}
		errs = append(errs, b.store.close(!b.tempDir))
		if b.tempDir {
			errs = append(errs, os.RemoveAll(b.dir))
		}
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

func (b *Broker) acceptLoop(ln net.Listener, handler handlerFunc) {
	defer b.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-b.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			b.logf("rocketmq: accept: %v", err)
			select {
			case <-b.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		c := newConn(nc)
		b.connMu.Lock()
		if b.closed {
			b.connMu.Unlock()
			c.close()
			return
		}
		b.conns[c] = struct{}{}
		b.wg.Add(1)
		b.connMu.Unlock()
		go b.serveConn(c, handler)
	}
}

// serveConn reads frames and serves each request on its own goroutine so a
// suspended pull never blocks heartbeats or offset commits.
func (b *Broker) serveConn(c *conn, handler handlerFunc) {
	defer b.wg.Done()
	defer func() {
		c.close()
		b.connMu.Lock()
		delete(b.conns, c)
		b.connMu.Unlock()
		b.notifyGroups(b.consumers.connClosed(c))
	}()
	r := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		req, err := readCommand(r)
		if err != nil {
			if errors.Is(err, errFrame) {
				b.logf("rocketmq: %s: %v; closing connection", c.remote, err)
			}
			return
		}
		if req.isResponse() {
			// Answers to our oneway notifications are not awaited.
			continue
		}
		// Offset commits are applied in arrival order: the client persists
		// them (without waiting for an answer) right before it closes the
		// connection, and a later commit must not be overtaken by an older one.
		if req.Code == reqUpdateConsumerOffset {
			b.serveRequest(c, req, handler)
			continue
		}
		select {
		case c.sem <- struct{}{}:
		case <-c.closed:
			return
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() { <-c.sem }()
			b.serveRequest(c, req, handler)
		}()
	}
}

func (b *Broker) serveRequest(c *conn, req *command, handler handlerFunc) {
	resp := b.safeHandle(c, req, handler)
	if resp == nil || req.isOneway() {
		return
	}
	resp.Opaque = req.Opaque
	resp.Flag = flagResponse
	resp.Version = protocolVersion
	if err := c.write(resp, req.serializeType); err != nil && !c.isClosed() {
		b.logf("rocketmq: %s: write response to code %d: %v", c.remote, req.Code, err)
	}
}

// safeHandle turns a handler panic into a SYSTEM_ERROR response instead of
// taking the process down.
func (b *Broker) safeHandle(c *conn, req *command, handler handlerFunc) (resp *command) {
	defer func() {
		if r := recover(); r != nil {
			b.logf("rocketmq: panic serving code %d from %s: %v\n%s", req.Code, c.remote, r, debug.Stack())
			resp = errResp(resSystemError, fmt.Sprintf("internal error serving request code %d", req.Code))
		}
	}()
	return handler(c, req)
}

func (b *Broker) housekeepingLoop() {
	defer b.wg.Done()
	t := time.NewTicker(housekeeping)
	defer t.Stop()
	for {
		select {
		case <-b.done:
			return
		case now := <-t.C:
			b.notifyGroups(b.consumers.expire(now))
			if !b.tempDir {
				if err := b.store.saveMeta(); err != nil {
					b.logf("rocketmq: save metadata: %v", err)
				}
			}
		}
	}
}

// notifyGroups tells every member of the groups to rebalance.
func (b *Broker) notifyGroups(groups []string) {
	for _, g := range groups {
		conns := b.consumers.memberConns(g)
		b.logf("rocketmq: consumer group %s changed: %v", g, b.consumers.clientIDs(g))
		for _, c := range conns {
			cmd := &command{
				Code:      reqNotifyConsumerIdsChanged,
				Version:   protocolVersion,
				Opaque:    nextOpaque(),
				Flag:      flagOneway,
				ExtFields: map[string]string{"consumerGroup": g},
			}
			// Written asynchronously: a slow client must not stall the
			// heartbeat that triggered the change.
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				_ = c.write(cmd, serializeJSON)
			}()
		}
	}
}

var opaqueSeq atomic.Int32

func nextOpaque() int32 { return opaqueSeq.Add(1) }

func errResp(code int, remark string) *command {
	return &command{Code: code, Remark: remark}
}

func okResp(ext map[string]string, body []byte) *command {
	return &command{Code: resSuccess, ExtFields: ext, Body: body}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
