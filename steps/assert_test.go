package steps_test

import (
	"context"
	"strings"
	"testing"
)

// A failed assert says what it compared and the values it found, with or
// without a message, whatever the shape of its condition.
func TestAssertSaysWhatItCompared(t *testing.T) {
	for _, c := range []struct {
		name, steps string
		detail      string // the assert's detail, exactly
	}{
		{"comparison", "  - assert: idle.acked > 5\n", "idle.acked = 0 (target 5)"},
		{"comparison with a message", "  - assert: idle.acked > 5\n    message: nothing was sent\n", "nothing was sent (idle.acked = 0 (target 5))"},
		{"figure alone", "  - assert: idle.running\n", "idle.running = false"},
		{"figure alone with a message", "  - assert: idle.running\n    message: the producer must run\n", "the producer must run (idle.running = false)"},
		{"negation", "  - start: idle\n  - assert: \"!idle.running\"\n", "idle.running = true"},
		{"figure and comparison", "  - assert: idle.running || idle.acked >= 1\n", "idle.running = false, idle.acked = 0 (target 1)"},
		{"operator", "  - assert: \"'x' in idle.gauges\"\n", "idle.gauges = none"},
		{"constant", "  - assert: \"false\"\n    message: never\n", "never (the condition is false)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, out := run(t, context.Background(), t.TempDir(), c.steps)
			as := res.Runs[0].Asserts
			if len(as) != 1 || as[0].Passed {
				t.Fatalf("asserts %+v", as)
			}
			if want := "(assert, plan.yaml:"; !strings.HasPrefix(as[0].Step, "step ") || !strings.Contains(as[0].Step, want) {
				t.Errorf("the assert's step is %q, not named as steps are", as[0].Step)
			}
			if as[0].Detail != c.detail {
				t.Errorf("detail %q, want %q", as[0].Detail, c.detail)
			}
			if want := "assert FAILED: " + as[0].Expr + ": " + c.detail + "\n"; !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
			if strings.Contains(out, "()") {
				t.Errorf("empty parentheses in the output:\n%s", out)
			}
		})
	}
}

// An assert whose condition cannot be evaluated says why in the plan's
// words, without Go's type names.
func TestAssertErrorWithoutGoTypes(t *testing.T) {
	res, out := run(t, context.Background(), t.TempDir(), "  - shell: echo 1\n    as: n\n  - assert: probes.n > 1\n")
	as := res.Runs[0].Asserts
	if len(as) != 1 || as[0].Passed {
		t.Fatalf("asserts %+v", as)
	}
	if want := "mapping > number"; !strings.Contains(as[0].Detail, want) {
		t.Errorf("detail %q lacks %q", as[0].Detail, want)
	}
	if strings.Contains(out, "map[") || strings.Contains(out, "interface {}") {
		t.Errorf("Go types in the output:\n%s", out)
	}
}
