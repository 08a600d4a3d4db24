package rabbitmq

import (
	"strings"

	"github.com/planrun/planrun/drivers"
)

// This file tells planrun's accounting where RabbitMQ messages go. A
// message sent to the default exchange goes to the queue its routing key
// names: its destination is that queue's name. A message sent to an
// exchange goes to the destination "exchange/routing-key", and a consumer
// of a queue expects it when one of the queue's bindings the plan declares
// takes it: direct exchanges compare the routing key with the binding key,
// fanout exchanges take everything, topic exchanges match the binding
// key's words (* one word, # zero or more) as the broker does.

// destination is the accounting destination of a message published to
// exchange with key.
func destination(exchange, key string) string {
	if exchange == "" {
		return key
	}
	return exchange + "/" + key
}

// parseDestination splits an exchange destination; ok is false for a
// queue's name (the default exchange).
func (c *TargetConfig) parseDestination(dest string) (exchange, key string, ok bool) {
	for name := range builtinExchanges {
		if k, found := strings.CutPrefix(dest, name+"/"); found {
			return name, k, true
		}
	}
	for name := range c.Exchanges {
		if k, found := strings.CutPrefix(dest, name+"/"); found {
			return name, k, true
		}
	}
	return "", "", false
}

// routes reports whether a message published to exchange with routing key
// reaches queue through the bindings the plan declares.
func (c *TargetConfig) routes(queue, exchange, key string) bool {
	kind, ok := c.exchangeType(exchange)
	if !ok {
		return false
	}
	for _, b := range c.Queues[queue].Bindings {
		if b.Exchange != exchange {
			continue
		}
		switch kind {
		case "fanout":
			return true
		case "direct":
			if b.Key == key {
				return true
			}
		case "topic":
			if topicMatch(b.Key, key) {
				return true
			}
		}
	}
	return false
}

// topicMatch matches a routing key against a topic exchange's binding key:
// both are words separated by dots; * stands for exactly one word and #
// for zero or more.
func topicMatch(pattern, key string) bool {
	return matchWords(strings.Split(pattern, "."), strings.Split(key, "."))
}

func matchWords(p, k []string) bool {
	for len(p) > 0 {
		switch p[0] {
		case "#":
			// Collapse runs of #; then try every split.
			for len(p) > 1 && p[1] == "#" {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for i := 0; i <= len(k); i++ {
				if matchWords(p[1:], k[i:]) {
					return true
				}
			}
			return false
		case "*":
			if len(k) == 0 {
				return false
			}
		default:
			if len(k) == 0 || k[0] != p[0] {
				return false
			}
		}
		p, k = p[1:], k[1:]
	}
	return len(k) == 0
}

// Matcher implements drivers.SubscriptionMatcher: a consumer of a queue
// expects what was sent to the queue on the default exchange and what an
// exchange routed to it through the plan's bindings.
func (t *Target) Matcher(spec drivers.ConsumerSpec) func(string) bool {
	queue := spec.Topic
	return func(dest string) bool {
		if ex, key, ok := t.cfg.parseDestination(dest); ok {
			return t.cfg.routes(queue, ex, key)
		}
		return dest == queue
	}
}

// AccountingGroup implements drivers.SubscriptionGrouper: the consumers of
// a classic or quorum queue compete for its messages whichever group the
// plan gives them, so they form one group named after the queue; a stream
// is read whole by each group.
func (t *Target) AccountingGroup(spec drivers.ConsumerSpec) (string, string) {
	if t.cfg.queueType(spec.Topic) == "stream" {
		return spec.Topic, spec.Group
	}
	return spec.Topic, spec.Topic
}
