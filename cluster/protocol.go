// Package cluster runs one plan across several planrun processes: workers
// (planrun worker) hold shards of the plan's workloads and ship their
// figures; the conductor (planrun run --workers) runs the steps, starts and
// stops the shards, and merges what they measured. The control protocol is
// net/rpc with gob over TCP: one connection per worker, opened by the
// conductor, a shared token checked when it joins.
package cluster

import (
	"github.com/planrun/planrun/metrics"
	"github.com/planrun/planrun/workloads"
)

// service is the name the worker's RPC methods are registered under.
const service = "Worker"

// JoinArgs is what the conductor sends first: who it is and the plan.
type JoinArgs struct {
	Token   string
	Version string
	// File names the plan in messages; Source is its text.
	File   string
	Source []byte
	// Set are the --set values and Env the environment variables the plan
	// read on the conductor, so that the worker decodes the same plan
	// without the user's files or environment.
	Set map[string]string
	Env map[string]string
	// Index is this worker's place in the fleet of Count.
	Index, Count int
}

// JoinReply says what the worker is.
type JoinReply struct {
	Host string
	PID  int
	CPUs int
}

// ClockReply is the worker's clock, for offset measurement.
type ClockReply struct {
	Now int64 // unix nanos
}

// OpenArgs prepares one run (matrix combination Run) on the worker.
type OpenArgs struct {
	Call
	Run int
	// RunID goes into message headers; Start is the run's start on the
	// worker's clock (unix nanos), for short headers.
	RunID  uint16
	Start  int64
	Shards []ShardSpec
}

// ShardSpec is one workload's shard on this worker: part Index of Of; ID
// is its stream id in message headers, unique across the fleet.
type ShardSpec struct {
	Workload  string
	Index, Of int
	ID        uint16
}

// Empty is for calls without arguments or results.
type Empty struct{}

// Call numbers a control call, so that the conductor can cancel it on the
// worker (Cancel) when it gives up waiting: the worker runs each numbered
// call under a context of its own.
type Call struct{ ID uint64 }

func (c *Call) setID(id uint64) { c.ID = id }

// CancelArgs names the call the conductor gave up on.
type CancelArgs struct{ ID uint64 }

// FiguresArgs asks for the figures: at once (Wait 0), or as a long poll
// that the worker answers as soon as something changes (a shard stopped by
// itself, a warning, a failure, a Wake) and else after Wait nanoseconds.
type FiguresArgs struct {
	Call
	Wait int64
}

// StartArgs starts shards at At (unix nanos on the worker's clock), so
// that every worker starts together.
type StartArgs struct {
	Call
	Workloads []string
	At        int64
}

// StopArgs stops shards; Timeout bounds the stop (nanoseconds).
type StopArgs struct {
	Call
	Workloads []string
	Timeout   int64
}

// Figures are what a worker measured since its previous Figures.
type Figures struct {
	Now       int64 // unix nanos on the worker's clock when taken
	Workloads map[string]ShardFigures
	// Acct is what the worker's accounting learnt: which messages were
	// acknowledged and received, by identity, so that a message acked on
	// one worker and received on another is accounted once. Only Figures
	// calls carry it, one at a time, so that the conductor applies the
	// deltas in the order they were packed (they number topics once).
	Acct     workloads.PackedDelta
	Warnings []string
	// Failure is set when a shard hit an error that ends the run.
	Failure string
	// Errors are what the call that returned these figures could not do
	// (a shard that would not start or stop): figures still come back.
	Errors []string
}

// ShardFigures are one shard's figures.
type ShardFigures struct {
	Running bool
	Delta   metrics.Delta
	Gauges  map[string]float64
}

// SetArgs changes a running shard's setting (a set step): Rate is the
// shard's part of the workload's new rate, Threads its part of the threads.
type SetArgs struct {
	Call
	Workload string
	Key      string
	Rate     *workloads.Rate
	Threads  int
	// Reset forgives what the shard is behind by (a search's trials).
	Reset bool
}
