package runner

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// Step is one entry of a plan's steps. A step kind is a struct whose field
// tagged with the kind's name (yaml:"wait") holds the step's main value and
// whose other fields are the step's own keys (timeout, poll...): the loader
// decodes the YAML straight into it, strictly, so adding a step kind touches
// only the steps package.
type Step interface {
	Run(ctx context.Context, r *Run) error
}

// Checker is a step that checks itself after decoding (workload names
// exist, values are in range); problems go to c.
type Checker interface {
	Check(c *CheckContext)
}

// StepKind is a registered kind of step.
type StepKind struct {
	Name string
	Doc  string
	New  func() Step
}

var (
	stepMu    sync.RWMutex
	stepKinds = map[string]StepKind{}
)

// RegisterStep makes a step kind available to plans. Called from init.
func RegisterStep(k StepKind) {
	stepMu.Lock()
	defer stepMu.Unlock()
	if _, dup := stepKinds[k.Name]; dup {
		panic(fmt.Sprintf("runner: step %q registered twice", k.Name))
	}
	stepKinds[k.Name] = k
}

// StepKinds lists the registered step kinds by name.
func StepKinds() []StepKind {
	stepMu.RLock()
	defer stepMu.RUnlock()
	out := make([]StepKind, 0, len(stepKinds))
	for _, k := range stepKinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func stepKind(name string) (StepKind, bool) {
	stepMu.RLock()
	defer stepMu.RUnlock()
	k, ok := stepKinds[name]
	return k, ok
}

func stepNames() []string {
	var names []string
	for _, k := range StepKinds() {
		names = append(names, k.Name)
	}
	return names
}
