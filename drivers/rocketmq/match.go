package rocketmq

import (
	"strings"

	"github.com/planrun/planrun/drivers"
)

// RocketMQ topics are literal names, but a consumer's tag filter decides
// which of a topic's messages it gets: planrun's accounting therefore
// keeps what was acknowledged per topic and tag, and a consumer expects
// the tags its filter selects.

// tagged is the destination planrun accounts a message with tag under.
func tagged(topic, tag string) string {
	if tag == "" {
		return topic
	}
	return topic + " (tag " + tag + ")"
}

// ResolveTopic implements drivers.TopicResolver: the topic and the tag the
// producer sets.
func (p *rmqProducer) ResolveTopic(m *drivers.Message) string {
	topic := m.Topic
	if topic == "" {
		topic = p.topic
	}
	return tagged(topic, p.tags)
}

// Matcher implements drivers.SubscriptionMatcher: the consumer's topic,
// with the tags its filter expression (TagA || TagB, * for all) selects.
func (t *Target) Matcher(spec drivers.ConsumerSpec) func(topic string) bool {
	expr := "*"
	if o, ok := spec.Options.(*ConsumeOptions); ok && strings.TrimSpace(o.Tags) != "" {
		expr = o.Tags
	}
	var tags []string
	for _, tag := range strings.Split(expr, "||") {
		if tag = strings.TrimSpace(tag); tag == "*" {
			tags = nil
			break
		}
		tags = append(tags, tag)
	}
	return func(dest string) bool {
		if dest == spec.Topic {
			return tags == nil
		}
		if tags == nil {
			return strings.HasPrefix(dest, spec.Topic+" (tag ")
		}
		for _, tag := range tags {
			if dest == tagged(spec.Topic, tag) {
				return true
			}
		}
		return false
	}
}
