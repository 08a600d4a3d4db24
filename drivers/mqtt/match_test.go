package mqtt

import (
	"strings"
	"testing"

	"github.com/planrun/planrun/drivers"
)

func TestTopicMatches(t *testing.T) {
	for _, c := range []struct {
		filter, topic string
		want          bool
	}{
		{"a/b", "a/b", true},
		{"a/b", "a/c", false},
		{"a/b", "a/b/c", false},
		{"a/b/c", "a/b", false},
		{"a/+", "a/b", true},
		{"a/+", "a/", true},
		{"a/+", "a", false},
		{"a/+", "a/b/c", false},
		{"+/+", "/x", true},
		{"a/#", "a", true},
		{"a/#", "a/b/c", true},
		{"a/#", "b/c", false},
		{"#", "a/b", true},
		{"#", "$SYS/x", false},
		{"+/x", "$SYS/x", false},
		{"$SYS/#", "$SYS/x", true},
		{"devices/+/data", "devices/7/data", true},
		{"devices/+/data", "devices/7/status", false},
	} {
		if got := TopicMatches(strings.Split(c.filter, "/"), c.topic); got != c.want {
			t.Errorf("filter %q, topic %q: %v, want %v", c.filter, c.topic, got, c.want)
		}
	}
}

func TestMatcherAndGroup(t *testing.T) {
	var target Target
	for _, c := range []struct {
		name     string
		spec     drivers.ConsumerSpec
		match    []string
		miss     []string
		sub, grp string
	}{
		{name: "wildcard", spec: drivers.ConsumerSpec{Workload: "w", Topic: "devices/+/data", Group: "w"},
			match: []string{"devices/0/data", "devices/x/data"}, miss: []string{"devices/0/status", "devices/data"},
			sub: "devices/+/data", grp: "w"},
		{name: "share prefix", spec: drivers.ConsumerSpec{Workload: "c1", Topic: "$share/g/devices/#", Group: "c1"},
			match: []string{"devices/1/data", "devices"}, miss: []string{"other/1"},
			sub: "$share/g/devices/#", grp: "g"},
		{name: "shared option", spec: drivers.ConsumerSpec{Workload: "c2", Topic: "devices/#", Group: "g", Options: &ConsumeOptions{Shared: true}},
			match: []string{"devices/1/data"}, sub: "$share/g/devices/#", grp: "g"},
		{name: "client template", spec: drivers.ConsumerSpec{Workload: "w", Topic: "cmd/{client}/in", Group: "w", Options: &ConsumeOptions{Clients: 3}},
			match: []string{"cmd/0/in", "cmd/2/in"}, miss: []string{"cmd/3/in", "cmd/01/in", "cmd/x/in", "cmd/1/out", "cmd/1"},
			sub: "cmd/{client}/in", grp: "w"},
		{name: "client template in a level", spec: drivers.ConsumerSpec{Workload: "w", Topic: "cmd/dev-{client}/#", Group: "w", Options: &ConsumeOptions{Clients: 12}},
			match: []string{"cmd/dev-11/in", "cmd/dev-0"}, miss: []string{"cmd/dev-12/in", "cmd/dev-/in", "cmd/x-1/in"},
			sub: "cmd/dev-{client}/#", grp: "w"},
		{name: "workload template", spec: drivers.ConsumerSpec{Workload: "w", Topic: "{workload}/+", Group: "w"},
			match: []string{"w/a"}, miss: []string{"{workload}/a"}, sub: "{workload}/+", grp: "w"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := target.Matcher(c.spec)
			for _, topic := range c.match {
				if !m(topic) {
					t.Errorf("%q does not match %q", c.spec.Topic, topic)
				}
			}
			for _, topic := range c.miss {
				if m(topic) {
					t.Errorf("%q matches %q", c.spec.Topic, topic)
				}
			}
			if sub, grp := target.AccountingGroup(c.spec); sub != c.sub || grp != c.grp {
				t.Errorf("accounting group %q %q, want %q %q", sub, grp, c.sub, c.grp)
			}
		})
	}
}
