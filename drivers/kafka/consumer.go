package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/IBM/sarama"

	"github.com/planrun/planrun/drivers"
)

const commitInterval = time.Second

// consumer is one member of a consumer group reading one topic.
type consumer struct {
	topic, group string
	cg           sarama.ConsumerGroup

	mu        sync.Mutex
	closed    bool
	running   bool
	runCancel context.CancelFunc
	runDone   chan struct{}

	partitions atomic.Int64
	errs       atomic.Int64
	errsDone   chan struct{}
	events     drivers.EventSink
	sessions   atomic.Int64 // group sessions set up: every one after the first is a rebalance
}

var _ drivers.Gauger = (*consumer)(nil)

// NewConsumer implements drivers.TargetOf.
func (t *Target) NewConsumer(ctx context.Context, spec drivers.ConsumerSpec, opts *ConsumeOptions) (drivers.Consumer, error) {
	if spec.Group == "" {
		return nil, fmt.Errorf("kafka: consumer of topic %s (workload %s) needs a group", spec.Topic, spec.Workload)
	}
	sc := t.clientConfig()
	sc.Consumer.Return.Errors = true
	sc.Consumer.Offsets.AutoCommit.Enable = true
	sc.Consumer.Offsets.AutoCommit.Interval = commitInterval
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	if spec.FromLatest {
		sc.Consumer.Offsets.Initial = sarama.OffsetNewest
	}
	if opts.FetchSize > 0 {
		sc.Consumer.Fetch.Default = int32(opts.FetchSize)
	}
	if opts.MaxWait > 0 {
		sc.Consumer.MaxWaitTime = opts.MaxWait
	}
	if opts.SessionTimeout > 0 {
		sc.Consumer.Group.Session.Timeout = opts.SessionTimeout
		// Kafka's rule of thumb: three heartbeats per session timeout.
		sc.Consumer.Group.Heartbeat.Interval = (opts.SessionTimeout / 3).Truncate(time.Millisecond)
	}
	strategy, _ := strategyOf(opts.Rebalance)
	sc.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy}
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("kafka: consumer group %s on topic %s (workload %s): %w", spec.Group, spec.Topic, spec.Workload, configError("consume options", err))
	}

	c := &consumer{topic: spec.Topic, group: spec.Group, errsDone: make(chan struct{}), events: spec.Events}
	err := withContext(ctx, func() error {
		cg, err := sarama.NewConsumerGroup(t.brokers, spec.Group, sc)
		if err != nil {
			return err
		}
		c.cg = cg
		return nil
	}, func() {
		if c.cg != nil {
			_ = c.cg.Close()
		}
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: consumer group %s on topic %s (workload %s): connect to %v: %w", spec.Group, spec.Topic, spec.Workload, t.brokers, err)
	}
	// Fetch errors are retried by sarama; they only need counting.
	go func() {
		defer close(c.errsDone)
		for err := range c.cg.Errors() {
			c.errs.Add(1)
			drivers.Emit(c.events, drivers.Event{Kind: drivers.ReceiveError, Reason: drivers.Reason(err)})
		}
	}()
	return c, nil
}

var errConsumerClosed = errors.New("kafka: consumer is closed")

// Run implements drivers.Consumer. It rejoins the group after every
// rebalance and returns nil when ctx is done or the consumer is closed.
func (c *consumer) Run(ctx context.Context, handle func(*drivers.Message)) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errConsumerClosed
	}
	if c.running {
		c.mu.Unlock()
		return fmt.Errorf("kafka: consumer group %s on topic %s is already running", c.group, c.topic)
	}
	ctx, cancel := context.WithCancel(ctx)
	c.running, c.runCancel, c.runDone = true, cancel, make(chan struct{})
	done := c.runDone
	c.mu.Unlock()
	defer close(done)
	defer cancel()

	h := &groupHandler{c: c, handle: handle}
	topics := []string{c.topic}
	for {
		// Consume returns after each rebalance; its session release
		// commits the marked offsets.
		err := c.cg.Consume(ctx, topics, h)
		if ctx.Err() != nil || errors.Is(err, sarama.ErrClosedConsumerGroup) {
			return nil
		}
		if err != nil && !transient(err) {
			return fmt.Errorf("kafka: consumer group %s on topic %s: %w", c.group, c.topic, err)
		}
		if err != nil {
			// The brokers are away (restarting, unreachable): try again,
			// as a Kafka consumer application does, until Run is stopped.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
}

// transient reports whether a group's Consume failed because the brokers
// could not be reached for a while, rather than because of how the group
// is configured: Run then tries again.
func transient(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, sarama.ErrOutOfBrokers), errors.Is(err, sarama.ErrNotConnected),
		errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.As(err, &ne):
		return true
	}
	var ke sarama.KError
	if errors.As(err, &ke) {
		switch ke {
		case sarama.ErrConsumerCoordinatorNotAvailable, sarama.ErrNotCoordinatorForConsumer, sarama.ErrOffsetsLoadInProgress,
			sarama.ErrRebalanceInProgress, sarama.ErrLeaderNotAvailable, sarama.ErrNotLeaderForPartition,
			sarama.ErrRequestTimedOut, sarama.ErrNetworkException:
			return true
		}
	}
	return false
}

// Close implements drivers.Consumer: it stops Run, commits every handled
// message and leaves the group, so the next member starts right after.
func (c *consumer) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cancel, done := c.runCancel, c.runDone
	c.mu.Unlock()
	if cancel != nil {
		// Leaving the group before the session released would make the
		// final commit come from a member the broker no longer knows.
		cancel()
		<-done
	}
	err := c.cg.Close()
	<-c.errsDone
	if err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
		return fmt.Errorf("kafka: close consumer group %s on topic %s: %w", c.group, c.topic, err)
	}
	return nil
}

// Gauges implements drivers.Gauger.
func (c *consumer) Gauges() map[string]float64 {
	return map[string]float64{
		"partitions":     float64(c.partitions.Load()),
		"consume_errors": float64(c.errs.Load()),
	}
}

type groupHandler struct {
	c      *consumer
	handle func(*drivers.Message)
}

func (h *groupHandler) Setup(s sarama.ConsumerGroupSession) error {
	n := len(s.Claims()[h.c.topic])
	h.c.partitions.Store(int64(n))
	if h.c.sessions.Add(1) > 1 {
		drivers.Emit(h.c.events, drivers.Event{Kind: drivers.Rebalance, Reason: fmt.Sprintf("%d partitions assigned", n)})
	}
	return nil
}

func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error {
	h.c.partitions.Store(0)
	return nil
}

// ConsumeClaim hands each message over and marks it only once handle
// returned, so a commit never covers a message the workload did not get.
func (h *groupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	done := s.Context().Done()
	msgs := claim.Messages()
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return nil
			}
			h.handle(&drivers.Message{
				Topic:     m.Topic,
				Key:       m.Key,
				Value:     m.Value,
				Partition: m.Partition,
				Offset:    m.Offset,
				Received:  time.Now(),
			})
			s.MarkMessage(m, "")
		case <-done:
			return nil
		}
	}
}
