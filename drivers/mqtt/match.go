package mqtt

import (
	"strconv"
	"strings"

	"github.com/planrun/planrun/drivers"
)

// This file tells planrun's accounting where MQTT messages go: the concrete
// topic of a templated publish (devices/{client}/data from client 7 is
// devices/7/data) and which concrete topics a subscription covers (+ and #
// wildcards, $share/<group>/ shared subscriptions, {client} templates of a
// consumer's clients), so that a consumer on devices/+/data expects what
// every client published.

// topicOf is the concrete topic m goes to from client i of the fleet.
func (p *Producer) topicOf(m *drivers.Message, i int) string {
	if m.Topic != p.topic && m.Topic != "" {
		return newExpander(m.Topic, map[string]string{"workload": p.workload}).client(p.f.base + i)
	}
	return p.f.members[i].topic
}

// client is the fleet member that sends m.
func (p *Producer) client(m *drivers.Message) int {
	n := len(p.f.members)
	i := m.Source % n
	if i < 0 {
		i += n
	}
	return i
}

// ResolveTopic implements drivers.TopicResolver: the topic template
// expanded for the client that sends m.
func (p *Producer) ResolveTopic(m *drivers.Message) string { return p.topicOf(m, p.client(m)) }

// subscription is what a consumer spec subscribes to: the filter without
// its $share/<group>/ prefix, and the share group if it has one.
func subscription(spec drivers.ConsumerSpec) (filter, share string) {
	filter = strings.ReplaceAll(spec.Topic, "{workload}", spec.Workload)
	if rest, ok := strings.CutPrefix(filter, "$share/"); ok {
		if g, f, ok := strings.Cut(rest, "/"); ok {
			return f, g
		}
	}
	if o, ok := spec.Options.(*ConsumeOptions); ok && o.Shared {
		return filter, spec.Group
	}
	return filter, ""
}

// AccountingGroup implements drivers.SubscriptionGrouper: the consumers of
// one share group split its messages between them, so they form one
// accounting group whichever workloads they belong to, and whether the plan
// writes $share/<group>/<filter> or shared: true with group: <group>.
func (t *Target) AccountingGroup(spec drivers.ConsumerSpec) (string, string) {
	filter, share := subscription(spec)
	if share == "" {
		return spec.Topic, spec.Group
	}
	return "$share/" + share + "/" + filter, share
}

// Matcher implements drivers.SubscriptionMatcher: MQTT's topic matching
// (+ one level, # the rest, no wildcard at the first level matching a topic
// starting with $), over the filter of every subscribing client when it has
// {client} in it.
func (t *Target) Matcher(spec drivers.ConsumerSpec) func(topic string) bool {
	filter, _ := subscription(spec)
	clients := 1
	if o, ok := spec.Options.(*ConsumeOptions); ok {
		clients = max(o.Clients, 1)
	}
	return filterMatcher(filter, clients)
}

// filterMatcher matches topics against filter, whose {client} stands for
// the index of each of clients subscribers (0 to clients-1).
func filterMatcher(filter string, clients int) func(string) bool {
	levels := strings.Split(filter, "/")
	first := -1
	for k, l := range levels {
		if strings.Contains(l, "{client}") {
			first = k
			break
		}
	}
	if first < 0 {
		return func(topic string) bool { return TopicMatches(levels, topic) }
	}
	pre, _, _ := strings.Cut(levels[first], "{client}")
	return func(topic string) bool {
		// The first level holding {client} gives the subscriber's index;
		// the filter expanded for it must then match as a whole.
		tl := strings.Split(topic, "/")
		if first >= len(tl) {
			return false
		}
		s, ok := strings.CutPrefix(tl[first], pre)
		if !ok {
			return false
		}
		j := 0
		for j < len(s) && j < 10 && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == 0 || (j > 1 && s[0] == '0') {
			return false
		}
		i, err := strconv.Atoi(s[:j])
		if err != nil || i >= clients {
			return false
		}
		expanded := strings.Split(strings.ReplaceAll(filter, "{client}", strconv.Itoa(i)), "/")
		return TopicMatches(expanded, topic)
	}
}

// TopicMatches reports whether a topic matches a filter split into levels,
// by MQTT's rules (3.1.1 section 4.7).
func TopicMatches(filter []string, topic string) bool {
	if strings.HasPrefix(topic, "$") && len(filter) > 0 && (filter[0] == "+" || filter[0] == "#") {
		return false
	}
	for k, f := range filter {
		if f == "#" {
			return true // the rest, the parent level included
		}
		var level string
		var more bool
		level, topic, more = strings.Cut(topic, "/")
		if f != "+" && f != level {
			return false
		}
		if !more {
			// The topic ends here: so must the filter, or go on with # only.
			return k == len(filter)-1 || (k == len(filter)-2 && filter[k+1] == "#")
		}
	}
	return false // the topic has more levels than the filter
}
