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
	Size     units.Size    `yaml:"size" default:"1KiB" doc:"payload size of each message; planrun's header (run, producer stream, sequence number, intended send time) takes the first 22 bytes when the size allows, a short one 11 to 21 bytes"`
	Threads  int           `yaml:"threads" default:"1" doc:"concurrent senders, each waiting for its ack: the most messages in flight (kafka: one sender keeps up to this many in flight, plus what the rate sends during the linger and 100 ms more, so that a linger does not cap the rate)"`
	Rate     Rate          `yaml:"rate" doc:"target messages per second over all threads (0 or absent = as fast as acks allow), or a schedule: a list of stages {to: RATE, over: DURATION} (a linear ramp from the rate before; without over: at once) and {hold: DURATION}, starting from 0; the last rate holds until the workload stops"`
	Interval time.Duration `yaml:"interval" doc:"instead of rate: every source (client or thread) sends one message per interval"`
	Count    int64         `yaml:"count" doc:"stop after this many messages in total (across restarts); 0 = until stopped"`
	Duration time.Duration `yaml:"duration" doc:"stop this long after each start"`
	Keys     string        `yaml:"keys" default:"none" doc:"message keys: none; sequence, unique in the run (the producer stream in hex, then the message's number in it: 10003-42 is workload 1's thread 3, message 42; threads, workloads and shards on different workers never share a key); or random (64 random bits in hex)"`
	// ConnectFirst is for fleets: the seed procedures connect every client
	// before anyone publishes.
	ConnectFirst bool `yaml:"connect_first" doc:"wait until every client connection is open before the first send (drivers with background connects, like mqtt)"`
}

// Check reports problems a plan author can fix; the loader prefixes the place.
func (s *ProduceSpec) Check() []string {
	var errs []string
	if s.Threads < 0 || s.Threads > 65535 {
		errs = append(errs, fmt.Sprintf("threads must be from 1 to 65535, got %d", s.Threads))
	}
	if s.Rate.Fixed < 0 {
		errs = append(errs, fmt.Sprintf("rate must be 0 (unlimited) or more, got %g", s.Rate.Fixed))
	}
	if s.Rate.Set() && s.Interval > 0 {
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
	Group       string        `yaml:"group" default:"the workload's name" doc:"consumer group; a restarted consumer continues from the group's committed position"`
	From        string        `yaml:"from" default:"earliest" doc:"where a group with no committed position starts: earliest or latest"`
	Consumers   int           `yaml:"consumers" default:"1" doc:"consumer instances in the group inside this workload"`
	Count       int64         `yaml:"count" doc:"stop after receiving this many messages in total; 0 = until stopped"`
	LagInterval time.Duration `yaml:"lag_interval" default:"1s" doc:"how often to ask the broker for the group's lag; 0s = never"`
	// InstanceBase numbers this process's consumer instances from where
	// its shard starts when the workload is split over worker processes.
	InstanceBase int `yaml:"-"`
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
	Mode    string `yaml:"mode" default:"pool" doc:"pool: a bounded pool of threads; the receiver waits when all are busy. queue: each message goes to an unbounded queue the threads drain; the receiver never waits"`
	Threads int    `yaml:"threads" default:"1" doc:"workers that publish to the destination"`
	Count   int64  `yaml:"count" doc:"stop after relaying this many messages; 0 = until stopped"`
}

// RelayFrom is where a relay reads (decoded with the source driver's consume options).
type RelayFrom struct {
	Topic string `yaml:"topic" required:"true" doc:"topic to read"`
	Group string `yaml:"group" default:"the workload's name" doc:"consumer group"`
	From  string `yaml:"from" default:"earliest" doc:"where a group with no committed position starts: earliest or latest"`
}

// RelayTo is where a relay writes (decoded with the destination driver's produce options).
type RelayTo struct {
	Target string `yaml:"target" default:"the workload's target" doc:"target to publish to"`
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
