package rabbitmq

import (
	"testing"

	"github.com/planrun/planrun/drivers"
)

// Topic binding keys match routing keys the way RabbitMQ's topic exchange
// does: words split at dots, * one word, # zero or more.
func TestTopicMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, key string
		want         bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"*.orders", "eu.orders", true},
		{"*.orders", "orders", false},
		{"*.orders", "eu.de.orders", false},
		{"eu.#", "eu", true},
		{"eu.#", "eu.de.stock", true},
		{"eu.#", "us.de", false},
		{"#", "", true},
		{"#", "a.b.c", true},
		{"#.c", "c", true},
		{"#.c", "a.b.c", true},
		{"#.c", "a.b.d", false},
		{"a.#.c", "a.c", true},
		{"a.#.c", "a.x.y.c", true},
		{"a.*.#", "a", false},
		{"a.*.#", "a.b", true},
		{"#.#", "x", true},
		{"*", "", true},
		{"a", "", false},
	} {
		if got := topicMatch(c.pattern, c.key); got != c.want {
			t.Errorf("topicMatch(%q, %q) = %v, want %v", c.pattern, c.key, got, c.want)
		}
	}
}

// A queue's consumer expects what reaches the queue: by name on the default
// exchange and through the plan's bindings; consumers of a classic queue
// share one group, a stream's groups each read it all.
func TestMatcherAndGroups(t *testing.T) {
	tg := &Target{cfg: TargetConfig{
		Exchanges: map[string]ExchangeConfig{"d": {}, "f": {Type: "fanout"}, "t": {Type: "topic"}},
		Queues: map[string]QueueConfig{
			"q":  {Bindings: []Binding{{Exchange: "d", Key: "red"}, {Exchange: "t", Key: "*.x"}, {Exchange: "amq.fanout"}}},
			"s":  {Type: "stream", Bindings: []Binding{{Exchange: "f"}}},
			"q2": {},
		},
	}}
	m := tg.Matcher(drivers.ConsumerSpec{Topic: "q"})
	for dest, want := range map[string]bool{
		"q": true, "q2": false, "d/red": true, "d/blue": false, "t/a.x": true, "t/a.b.x": false,
		"f/any": false, "amq.fanout/k": true, "amq.topic/a.x": false,
	} {
		if got := m(dest); got != want {
			t.Errorf("queue q covers %q: %v, want %v", dest, got, want)
		}
	}
	if s, g := tg.AccountingGroup(drivers.ConsumerSpec{Topic: "q", Group: "g1"}); s != "q" || g != "q" {
		t.Errorf("classic queue group (%s, %s), want (q, q)", s, g)
	}
	if s, g := tg.AccountingGroup(drivers.ConsumerSpec{Topic: "s", Group: "g1"}); s != "s" || g != "g1" {
		t.Errorf("stream group (%s, %s), want (s, g1)", s, g)
	}
}
