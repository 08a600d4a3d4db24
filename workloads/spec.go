// Package workloads runs what a plan's workloads do (produce, consume,
// relay) over any driver: pacing, headers, counting and timing live here.
package workloads

import (
	"fmt"
	"time"

	"github.com/planrun/planrun/units"
)

// ProduceSpec is the generic part of a workload's produce section.
type ProduceSpec struct {
	Topic    string        `yaml:"topic" required:"true" doc:"topic to send to"`
	Size     units.Size    `yaml:"size" doc:"payload size of each message (default 1KiB); a planrun header takes the first 22 bytes when it fits"`
	Threads  int           `yaml:"threads" doc:"concurrent senders, each waiting for its ack (default 1)"`
	Rate     float64       `yaml:"rate" doc:"target messages per second over all threads; 0 or absent = as fast as acks allow"`
	Interval time.Duration `yaml:"interval" doc:"instead of rate: every source (client or thread) sends one message per interval"`
	Count    int64         `yaml:"count" doc:"stop after this many messages in total (across restarts); 0 = until stopped"`
	Duration time.Duration `yaml:"duration" doc:"stop this long after each start"`
	Keys     string        `yaml:"keys" doc:"message keys: none (default), sequence, or random"`
	// ConnectFirst is for fleets: the seed procedures connect every client
	// before anyone publishes.
	ConnectFirst bool `yaml:"connect_first" doc:"wait until every client connection is open before the first send (drivers with background connects, like mqtt)"`
}

// Check reports problems a plan author can fix; the runner prefixes the place.
func (s *ProduceSpec) Check() []string {
	var errs []string
	if s.Threads < 0 || s.Threads > 65535 {
		errs = append(errs, fmt.Sprintf("threads must be from 1 to 65535, got %d", s.Threads))
	}
	if s.Rate < 0 {
		errs = append(errs, fmt.Sprintf("rate must be 0 (unlimited) or more, got %g", s.Rate))
	}
	if s.Rate > 0 && s.Interval > 0 {
		errs = append(errs, "give rate or interval, not both")
	}
	if s.Count < 0 {
		errs = append(errs, fmt.Sprintf("count must be 0 (until stopped) or more, got %d", s.Count))
	}
	switch s.Keys {
	case "", "none", "sequence", "random":
	default:
		errs = append(errs, fmt.Sprintf("keys must be none, sequence or random, got %q", s.Keys))
	}
	return errs
}

func (s *ProduceSpec) defaults() {
	if s.Size == 0 {
		s.Size = 1024
	}
	if s.Threads == 0 {
		s.Threads = 1
	}
}

// ConsumeSpec is the generic part of a workload's consume section.
type ConsumeSpec struct {
	Topic       string        `yaml:"topic" required:"true" doc:"topic to read"`
	Group       string        `yaml:"group" doc:"consumer group (default: the workload's name); a restarted consumer continues from the group's committed position"`
	From        string        `yaml:"from" doc:"where a group with no committed position starts: earliest (default) or latest"`
	Consumers   int           `yaml:"consumers" doc:"consumer instances in the group inside this workload (default 1)"`
	Count       int64         `yaml:"count" doc:"stop after receiving this many messages in total; 0 = until stopped"`
	LagInterval time.Duration `yaml:"lag_interval" doc:"how often to ask the broker for the group's lag (default 1s; 0s = never)"`
}

// Check reports problems a plan author can fix.
func (s *ConsumeSpec) Check() []string {
	var errs []string
	switch s.From {
	case "", "earliest", "latest":
	default:
		errs = append(errs, fmt.Sprintf("from must be earliest or latest, got %q", s.From))
	}
	if s.Consumers < 0 {
		errs = append(errs, fmt.Sprintf("consumers must be 1 or more, got %d", s.Consumers))
	}
	if s.Count < 0 {
		errs = append(errs, fmt.Sprintf("count must be 0 (until stopped) or more, got %d", s.Count))
	}
	return errs
}

// RelaySpec is a relay's source and destination.
type RelaySpec struct {
	Mode    string `yaml:"mode" doc:"queue: hand each message to an unbounded worker queue; pool (default): a bounded pool of threads that makes the receiver wait when all are busy"`
	Threads int    `yaml:"threads" doc:"workers that publish to the destination (default 1)"`
	Count   int64  `yaml:"count" doc:"stop after relaying this many messages; 0 = until stopped"`
}

// RelayFrom is where a relay reads (decoded with the source driver's consume options).
type RelayFrom struct {
	Topic string `yaml:"topic" required:"true" doc:"topic to read"`
	Group string `yaml:"group" doc:"consumer group (default: the workload's name)"`
	From  string `yaml:"from" doc:"earliest (default) or latest for a new group"`
}

// RelayTo is where a relay writes (decoded with the destination driver's produce options).
type RelayTo struct {
	Target string `yaml:"target" doc:"target to publish to (default: the workload's target)"`
	Topic  string `yaml:"topic" required:"true" doc:"topic to publish to"`
}

// Check reports problems a plan author can fix.
func (s *RelaySpec) Check() []string {
	var errs []string
	switch s.Mode {
	case "", "queue", "pool":
	default:
		errs = append(errs, fmt.Sprintf("mode must be queue or pool, got %q", s.Mode))
	}
	if s.Threads < 0 {
		errs = append(errs, fmt.Sprintf("threads must be 1 or more, got %d", s.Threads))
	}
	return errs
}
