package redact

import (
	"testing"

	"github.com/planrun/planrun/results"
)

func TestRedactAll(t *testing.T) {
	sec := map[string]bool{"hunter2": true}
	res := &results.Result{
		Description: "pw hunter2",
		Vars:        map[string]string{"copy": "x-hunter2"},
		Tables:      []results.Table{{Rows: [][]string{{"hunter2"}}}},
		Runs: []results.Run{{
			Steps:   []results.Step{{What: "step-hunter2"}},
			Asserts: []results.Assert{{Detail: "vars.copy = x-hunter2"}},
			Probes:  map[string]any{"p": "hunter2", "n": 3.0},
		}},
	}
	RedactAll(res, sec)
	if res.Description != "pw [redacted]" || res.Vars["copy"] != "x-[redacted]" || res.Tables[0].Rows[0][0] != "[redacted]" ||
		res.Runs[0].Steps[0].What != "step-[redacted]" || res.Runs[0].Asserts[0].Detail != "vars.copy = x-[redacted]" ||
		res.Runs[0].Probes["p"] != "[redacted]" || res.Runs[0].Probes["n"] != 3.0 {
		t.Errorf("not redacted everywhere: %+v", res)
	}
}

// A secret that contains another is replaced whole, whichever the map
// yields first.
func TestRedactNestedSecrets(t *testing.T) {
	sec := map[string]bool{"abc": true, "abcdef": true}
	for range 20 {
		if got := Redact("key=abcdef and abc", sec); got != "key=[redacted] and [redacted]" {
			t.Fatalf("Redact = %q", got)
		}
	}
}
