package plan

import (
	"context"
	"time"

	"github.com/planrun/planrun/drivers"
	"github.com/planrun/planrun/registry"
	"github.com/planrun/planrun/results"
	"github.com/planrun/planrun/workloads"
)

// Step is one entry of a plan's steps. A step kind is a struct whose field
// tagged with the kind's name (yaml:"wait") holds the step's main value and
// whose other fields are the step's own keys (timeout, poll...): the loader
// decodes the YAML straight into it, strictly, so adding a step kind touches
// only the steps package.
type Step interface {
	Run(ctx context.Context, r Runtime) error
}

// Runtime is what a step sees of the run it belongs to.
type Runtime interface {
	// Env is the expression environment now: one consistent snapshot.
	Env() map[string]any
	// Changed returns a channel closed the next time a workload starts,
	// stops or finishes. Take it before reading Env so that no change
	// between the two goes unnoticed.
	Changed() <-chan struct{}
	// Workloads resolves names ("all" is every workload) to the run's workloads.
	Workloads(names []string) []workloads.Workload
	// Target returns an opened target by name.
	Target(name string) drivers.Target
	// SetStatus sets the line progress output shows for the step;
	// SetStatusFunc has it computed when the line is printed (a countdown),
	// with nothing shown when it returns "". Either ends with the step.
	SetStatus(s string)
	SetStatusFunc(f func(now time.Time) string)
	// Printf writes a line of output; Warn also records it in the report.
	Printf(format string, args ...any)
	Warn(msg string)
	// AddAssert records an assert's outcome; SetProbe keeps a value for
	// expressions (probes.<name>) and reports.
	AddAssert(a results.Assert)
	SetProbe(name string, v any)
	// StartPhase closes the current metrics phase and opens name, as a
	// step's phase: key does.
	StartPhase(name string)
	// AddSearch records a search step's trials for the report.
	AddSearch(s results.Search)
}

// Checker is a step that checks itself after decoding (workload names
// exist, values are in range); problems go to c.
type Checker interface {
	Check(c *CheckContext)
}

// LocalStep is a step that acts in the process that runs the workloads
// (the network step's proxy): a run over workers refuses it, and
// LocalOnly says why.
type LocalStep interface {
	LocalOnly() string
}

// ProbeKeeper is a step that keeps values as probes.<name> (SetProbe):
// expressions of later steps and of the report may read them, earlier
// ones may not.
type ProbeKeeper interface {
	KeptProbes() []string
}

// StepKind is a registered kind of step.
type StepKind = registry.Kind[Step]

var stepKinds = registry.NewKinds[Step]("step kind")

// RegisterStep makes a step kind available to plans. Called from init.
func RegisterStep(k StepKind) { stepKinds.Add(k) }

// StepKinds lists the registered step kinds by name.
func StepKinds() []StepKind { return stepKinds.All() }

// LookupStep returns the step kind registered under name.
func LookupStep(name string) (StepKind, bool) { return stepKinds.Lookup(name) }

func stepNames() []string { return stepKinds.Names() }
