package drivers

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Kinds of connection events a driver reports.
const (
	// Disconnected: a working connection was lost (Reason says how).
	Disconnected = "disconnected"
	// Reconnected: a connection lost earlier works again.
	Reconnected = "reconnected"
	// SendError: a send failed (Reason is its kind: timeout, refused...).
	SendError = "send_error"
	// ReceiveError: receiving failed (a poll, a fetch, a subscription).
	ReceiveError = "receive_error"
	// Rebalance: the broker reassigned a consumer group's partitions or
	// queues.
	Rebalance = "rebalance"
	// NetworkFault: a network step degraded the link between the workload
	// and its broker (Reason says how: "latency 200ms", "link cut").
	NetworkFault = "network_fault"
	// NetworkRestored: the link is back to its own condition.
	NetworkRestored = "network_restored"
)

// Event is something that happened to a workload's connections. Drivers
// report them to the EventSink of the spec they were opened with.
type Event struct {
	Kind   string // Disconnected, Reconnected, SendError, ReceiveError, Rebalance
	Reason string // short and stable, for counting: "connection refused", "timeout"
	// Client is the index of the connection among the workload's
	// connections (an MQTT fleet's client); 0 when it has one.
	Client int
	// Of is how many connections the workload holds (1 when it has one).
	Of int
	At time.Time
}

// EventSink receives a workload's connection events. Event is called from
// the drivers' own goroutines, concurrently, and must not block.
type EventSink interface {
	Event(Event)
}

// Emit reports e to s, stamping it with the time now if it has none; a nil
// sink drops it, so drivers need not check.
func Emit(s EventSink, e Event) {
	if s == nil {
		return
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	if e.Of <= 0 {
		e.Of = 1
	}
	s.Event(e)
}

// Reason names the kind of a connection or send error in a few words, the
// same for every driver, so that events of one cause count together:
// "connection refused", "connection reset", "connection closed", "timeout",
// "no route to host", "broken pipe"; other errors by their own text,
// shortened.
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to host"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "connection closed"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	// Libraries that flatten errors into text: recognise the usual words.
	s := err.Error()
	low := strings.ToLower(s)
	for _, k := range []struct{ word, reason string }{
		{"connection refused", "connection refused"},
		{"connection reset", "connection reset"},
		{"broken pipe", "broken pipe"},
		{"eof", "connection closed"},
		{"use of closed network connection", "connection closed"},
		{"no route to host", "no route to host"},
		{"i/o timeout", "timeout"},
		{"timed out", "timeout"},
		{"timeout", "timeout"},
		{"not connected", "not connected"},
	} {
		if strings.Contains(low, k.word) {
			return k.reason
		}
	}
	if i := strings.LastIndex(s, ": "); i >= 0 && i+2 < len(s) {
		s = s[i+2:]
	}
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// connectionReasons are the Reason values that mean the connection, not
// the message, failed.
var connectionReasons = map[string]bool{
	"connection refused": true, "connection reset": true, "connection closed": true,
	"broken pipe": true, "no route to host": true, "not connected": true,
}

// LinkWatch turns the send results of a client that hides its connections
// (RocketMQ, Kafka: they reconnect inside the library) into connection
// events: the first send that fails for a connection reason is a
// disconnect, the next send that succeeds a reconnect. Safe for concurrent
// use; the zero value with Sink set is ready.
type LinkWatch struct {
	Sink EventSink
	down atomic.Bool
}

// Result records one send's outcome.
func (w *LinkWatch) Result(err error) {
	if w == nil || w.Sink == nil {
		return
	}
	if err == nil {
		if w.down.Load() && w.down.CompareAndSwap(true, false) {
			Emit(w.Sink, Event{Kind: Reconnected})
		}
		return
	}
	if r := Reason(err); connectionReasons[r] && w.down.CompareAndSwap(false, true) {
		Emit(w.Sink, Event{Kind: Disconnected, Reason: r})
	}
}
