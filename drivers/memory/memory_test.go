package memory_test

import (
	"strings"
	"testing"

	_ "github.com/planrun/planrun/drivers/memory"
	"github.com/planrun/planrun/plan"
	_ "github.com/planrun/planrun/steps"
)

// Fault options that make no sense are plan mistakes, caught at load time.
func TestFaultOptionsChecked(t *testing.T) {
	for _, c := range []struct{ target, want string }{
		{"{ driver: memory, drop_every: -1 }", "drop_every must be 0 (never) or a positive count, got -1"},
		{"{ driver: memory, duplicate_every: -2 }", "duplicate_every must be 0"},
		{"{ driver: memory, reorder_every: -3 }", "reorder_every must be 0"},
		{"{ driver: memory, drop_every: x }", "plan.yaml:3:"},
	} {
		y := "name: p\ntargets:\n  mq: " + c.target + "\nworkloads:\n  w:\n    produce: { topic: a }\nsteps:\n  - start: w\n"
		_, _, err := plan.Parse("plan.yaml", []byte(y), plan.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "plan.yaml:") {
			t.Errorf("%s: error %v, want one with the position and %q", c.target, err, c.want)
		}
	}
	y := "name: p\ntargets:\n  mq: { driver: memory, drop_every: 3, duplicate_every: 4, reorder_every: 5 }\nworkloads:\n  w:\n    produce: { topic: a }\nsteps:\n  - start: w\n"
	if _, _, err := plan.Parse("plan.yaml", []byte(y), plan.Options{}); err != nil {
		t.Errorf("valid fault options: %v", err)
	}
}
