// Package results is what a run leaves behind: everything measured, in a
// form that is saved as JSON and rendered again later by any reporter.
package results

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/planrun/planrun/metrics"
)

// Status values of a run and of a whole result.
const (
	Passed      = "passed"
	AssertFail  = "assert-failed"
	Failed      = "failed"
	Interrupted = "interrupted"
)

// Result is one invocation of a plan: one Run per matrix combination.
type Result struct {
	Plan        string            `json:"plan"`
	File        string            `json:"file"`
	Description string            `json:"description,omitempty"`
	Title       string            `json:"title,omitempty"`
	Version     string            `json:"planrun_version"`
	Started     time.Time         `json:"started"`
	Finished    time.Time         `json:"finished"`
	Status      string            `json:"status"`
	Error       string            `json:"error,omitempty"`
	Vars        map[string]string `json:"vars"`
	VarOrder    []string          `json:"var_order,omitempty"`
	Environment Environment       `json:"environment"`
	Targets     []Target          `json:"targets,omitempty"`
	Runs        []Run             `json:"runs"`
	Tables      []Table           `json:"tables,omitempty"`
	Units       string            `json:"units"`
	// Format is the result format's version (see FormatVersion); 0 in
	// results saved before formats had a version.
	Format int `json:"format_version,omitempty"`
	// Violations are the invariants the run's figures do not hold, as
	// checked at the end of the run (see Check).
	Violations []Violation `json:"violations,omitempty"`
}

// Environment says where the run happened.
type Environment struct {
	Host      string `json:"host"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go_version"`
}

// Target records what a target was connected to.
type Target struct {
	Name   string `json:"name"`
	Driver string `json:"driver"`
	What   string `json:"what,omitempty"`
}

// Run is one matrix combination's run (the only one without a matrix).
type Run struct {
	Index       int               `json:"index"`
	Label       string            `json:"label,omitempty"`
	Combination map[string]string `json:"combination,omitempty"`
	Status      string            `json:"status"`
	Error       string            `json:"error,omitempty"`
	FailedStep  string            `json:"failed_step,omitempty"`
	Started     time.Time         `json:"started"`
	Finished    time.Time         `json:"finished"`
	Steps       []Step            `json:"steps"`
	Asserts     []Assert          `json:"asserts,omitempty"`
	Probes      map[string]any    `json:"probes,omitempty"`
	Warnings    []string          `json:"warnings,omitempty"`
	Metrics     metrics.Snapshot  `json:"metrics"`
	Kinds       map[string]string `json:"kinds"` // workload -> produce/consume/relay/connect
	// Roles say what each workload does; reports ask them, not kind names.
	Roles map[string]metrics.Role `json:"roles,omitempty"`
	// Searches are the search steps' trials, in the order they ran.
	Searches []Search `json:"searches,omitempty"`
	// Workers are the worker processes the run's workloads ran on, with
	// their clocks as the conductor measured them; empty for a run in one
	// process.
	Workers []Worker `json:"workers,omitempty"`
}

// Worker is one worker process of a run spread over several.
type Worker struct {
	Index int    `json:"index"`
	Addr  string `json:"addr"`
	Host  string `json:"host"`
	// Workloads lists the workloads that had a shard on this worker.
	Workloads []string `json:"workloads,omitempty"`
	// OffsetMs is the worker's clock minus the conductor's, as measured at
	// the start of the run; DriftMs how far it moved during the run
	// (largest change seen); RTTMs the round trip of the best measurement,
	// which bounds the error of both.
	OffsetMs float64 `json:"clock_offset_ms"`
	DriftMs  float64 `json:"clock_drift_ms"`
	RTTMs    float64 `json:"rtt_ms"`
	// Lost is set when the worker stopped answering during the run.
	Lost bool `json:"lost,omitempty"`
	// ReceivedBytes and SentBytes are the conductor's control traffic with
	// the worker during the run: figures and replies received, calls sent.
	ReceivedBytes int64 `json:"control_received_bytes"`
	SentBytes     int64 `json:"control_sent_bytes"`
	// FirstMessageS is when the worker's shards had their first message
	// acknowledged or received, in seconds since the run's start on the
	// conductor's clock (the worker's clock offset taken out); 0 for none.
	// Across workers that start together it shows the start skew.
	FirstMessageS float64 `json:"first_message_s,omitempty"`
}

// legacyRoles are the roles of the kinds results had before roles were
// saved, so older result files still render.
var legacyRoles = map[string]metrics.Role{
	"produce": {Sends: true},
	"consume": {Receives: true},
	"relay":   {Sends: true, Receives: true},
	"connect": {Connects: true},
}

// Role says what the named workload of the run does.
func (r *Run) Role(workload string) metrics.Role {
	if role, ok := r.Roles[workload]; ok {
		return role
	}
	return legacyRoles[r.Kinds[workload]]
}

// Search is what one search step did: every trial, and the rate it could
// confirm.
type Search struct {
	Name     string `json:"name"` // search.<name> in expressions
	Workload string `json:"workload"`
	// Rate is the highest rate a confirmation trial passed at, 0 when none
	// did; Found is where the bisection ended, before confirmation.
	Rate   float64       `json:"rate"`
	Found  float64       `json:"found_rate"`
	Trials []SearchTrial `json:"trials"`
}

// SearchTrial is one trial of a search: the target rate, how long it was
// measured and what the workload did in that window.
type SearchTrial struct {
	Rate    float64 `json:"rate"`
	Seconds float64 `json:"seconds"`
	// Confirm marks the confirmation trials after the bisection.
	Confirm  bool    `json:"confirm,omitempty"`
	Achieved float64 `json:"achieved_rate"`
	Acked    int64   `json:"acked"`
	Failed   int64   `json:"failed"`
	P99      float64 `json:"p99_ms"`
	Passed   bool    `json:"passed"`
	Detail   string  `json:"detail,omitempty"`
}

// Step records one executed step.
type Step struct {
	Index    int     `json:"index"`
	What     string  `json:"what"`
	Phase    string  `json:"phase,omitempty"`
	StartS   float64 `json:"start_s"`
	Duration float64 `json:"duration_s"`
	Skipped  bool    `json:"skipped,omitempty"`
	Error    string  `json:"error,omitempty"`
}

// Assert records one assert's outcome.
type Assert struct {
	Step    string `json:"step"`
	Expr    string `json:"expr"`
	Message string `json:"message,omitempty"`
	Passed  bool   `json:"passed"`
	Detail  string `json:"detail,omitempty"`
}

// Table is a computed table: reporters only lay it out. Its leading
// columns name the rows (matrix values, phase); a transposed table has one
// leading column, headed figure, whose cells head the columns once
// transposed.
type Table struct {
	Title     string     `json:"title"`
	Columns   []string   `json:"columns"`
	Rows      [][]string `json:"rows"`
	Transpose bool       `json:"transpose,omitempty"`
}

// Save writes r as indented JSON.
func (r *Result) Save(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding result: %w", err)
	}
	return os.WriteFile(path, data, 0o644)
}

// Load reads a saved result.
func Load(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if isSeries(path, data) {
		return nil, fmt.Errorf("%s is a series file, not a saved result: planrun report --from-series %s writes the reports and the result of its run", path, path)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s is not a planrun result: %w", path, err)
	}
	if r.Plan == "" && len(r.Runs) == 0 {
		return nil, fmt.Errorf("%s is not a planrun result (no plan, no runs)", path)
	}
	return &r, nil
}
