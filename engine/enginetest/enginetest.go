// Package enginetest runs plans written inline in tests.
package enginetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/results"
)

// Execute runs the whole plan y (steps and drivers must be registered by
// the caller's imports), logs what it printed and fails the test unless the
// run passed.
func Execute(t testing.TB, y string) *results.Result {
	t.Helper()
	res, _ := ExecuteOutput(t, y)
	return res
}

// ExecuteOutput is Execute that also returns what the run printed.
func ExecuteOutput(t testing.TB, y string) (*results.Result, string) {
	t.Helper()
	src, plans, err := plan.Parse("plan.yaml", []byte(y), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	e := &engine.Engine{Out: &out, Version: "test", StopTimeout: 10 * time.Second}
	res := e.Execute(context.Background(), src, plans)
	t.Log(out.String())
	if res.Status != results.Passed {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	CheckResult(t, res)
	return res, out.String()
}

// CheckResult fails the test for every invariant res does not hold (see
// results.Check): every plan a test runs checks that its figures add up.
func CheckResult(t testing.TB, res *results.Result) {
	t.Helper()
	for _, v := range res.Check().Violations {
		t.Errorf("figures do not add up: %s", v)
	}
}
