package rocketmq

import (
	"testing"

	"github.com/planrun/planrun/drivers"
)

func TestMatcherTags(t *testing.T) {
	var target Target
	dests := map[string]string{ // what producers with these tags acknowledge to
		"untagged": (&rmqProducer{topic: "t"}).ResolveTopic(&drivers.Message{Topic: "t"}),
		"red":      (&rmqProducer{topic: "t", tags: "red"}).ResolveTopic(&drivers.Message{Topic: "t"}),
		"blue":     (&rmqProducer{topic: "t", tags: "blue"}).ResolveTopic(&drivers.Message{Topic: "t"}),
		"other":    (&rmqProducer{topic: "u", tags: "red"}).ResolveTopic(&drivers.Message{Topic: "u"}),
	}
	for _, c := range []struct {
		filter string
		want   []string
	}{
		{"", []string{"untagged", "red", "blue"}},
		{"*", []string{"untagged", "red", "blue"}},
		{"red", []string{"red"}},
		{"red || blue", []string{"red", "blue"}},
		{"green", nil},
	} {
		m := target.Matcher(drivers.ConsumerSpec{Topic: "t", Options: &ConsumeOptions{Tags: c.filter}})
		var got []string
		for _, k := range []string{"untagged", "red", "blue", "other"} {
			if m(dests[k]) {
				got = append(got, k)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("filter %q covers %v, want %v", c.filter, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("filter %q covers %v, want %v", c.filter, got, c.want)
			}
		}
	}
}
