// Package steps holds the kinds of plan steps. Each kind registers itself
// with the plan package in init and decodes from the YAML users write.
package steps

import (
	"context"
	"strings"
	"time"

	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/workloads"
)

func init() {
	plan.RegisterStep(plan.StepKind{Name: "start", Doc: "start workloads in the background: `start: producer`, `start: [producer, consumer]` or `start: all`", New: func() plan.Step { return &Start{} }})
	plan.RegisterStep(plan.StepKind{Name: "stop", Doc: "stop workloads and wait until they have stopped: senders first, then relays and consumers after a drain (consumers commit their position)", New: func() plan.Step { return &Stop{Drain: workloads.DefaultDrain} }})
	plan.RegisterStep(plan.StepKind{Name: "restart", Doc: "stop (as stop does) then start workloads, with an optional pause between", New: func() plan.Step { return &Restart{Drain: workloads.DefaultDrain} }})
}

// Start starts workloads.
type Start struct {
	Workloads []string `yaml:"start" doc:"workloads to start, or all"`
}

// Check checks the names.
func (s *Start) Check(c *plan.CheckContext) { c.CheckWorkloads(s.Workloads, "start") }

// Describe names the step in output.
func (s *Start) Describe() string { return "start " + strings.Join(s.Workloads, ", ") }

// Run starts each workload in order.
func (s *Start) Run(ctx context.Context, r plan.Runtime) error {
	return startAll(ctx, r.Workloads(s.Workloads))
}

func startAll(ctx context.Context, ws []workloads.Workload) error {
	for _, w := range ws {
		if w.Running() {
			continue // starting what runs already is harmless in a plan
		}
		if err := w.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops workloads.
type Stop struct {
	Workloads []string      `yaml:"stop" doc:"workloads to stop, or all"`
	Drain     time.Duration `yaml:"drain" default:"5s" doc:"when the step names a workload that sends: how long relays and consumers may go on receiving what was acknowledged before they are stopped (it ends once they have it all, or received nothing for a second); what they still miss is in flight unless proven lost. 0s stops them at once"`
}

// Check checks the names.
func (s *Stop) Check(c *plan.CheckContext) { c.CheckWorkloads(s.Workloads, "stop") }

// Describe names the step in output.
func (s *Stop) Describe() string { return "stop " + strings.Join(s.Workloads, ", ") }

// Run stops the workloads in order (workloads.StopInOrder) and waits for
// all of them.
func (s *Stop) Run(ctx context.Context, r plan.Runtime) error {
	return workloads.StopInOrder(ctx, r.Workloads(s.Workloads), s.Drain)
}

// Restart stops then starts workloads.
type Restart struct {
	Workloads []string      `yaml:"restart" doc:"workloads to restart, or all"`
	Pause     time.Duration `yaml:"pause" default:"0s" doc:"how long to stay stopped before starting again"`
	Drain     time.Duration `yaml:"drain" default:"5s" doc:"when the step names a workload that sends: how long relays and consumers may go on receiving what was acknowledged before they are stopped (it ends once they have it all, or received nothing for a second); what they still miss is in flight unless proven lost. 0s stops them at once"`
}

// Check checks the names.
func (s *Restart) Check(c *plan.CheckContext) { c.CheckWorkloads(s.Workloads, "restart") }

// Describe names the step in output.
func (s *Restart) Describe() string { return "restart " + strings.Join(s.Workloads, ", ") }

// Run stops, pauses, starts.
func (s *Restart) Run(ctx context.Context, r plan.Runtime) error {
	ws := r.Workloads(s.Workloads)
	if err := workloads.StopInOrder(ctx, ws, s.Drain); err != nil {
		return err
	}
	if s.Pause > 0 {
		if err := sleep(ctx, s.Pause); err != nil {
			return err
		}
	}
	return startAll(ctx, ws)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
