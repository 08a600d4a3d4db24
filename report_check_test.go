package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planrun/planrun/results"
)

// planrun report --check: 0 for a result whose figures hold, 1 listing
// each violation, 2 for a file that is not a result; an older result says
// which checks do not apply.
func TestReportCheck(t *testing.T) {
	dir := t.TempDir()
	out := t.TempDir()
	if code := run([]string{"run", "--quiet", "--out", out, writePlan(t, memPlan)}, &bytes.Buffer{}, &bytes.Buffer{}); code != exitOK {
		t.Fatalf("run: exit %d", code)
	}
	good := filepath.Join(out, "cli.json")
	broken, err := results.Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if broken.Format != results.FormatVersion || len(broken.Violations) != 0 {
		t.Fatalf("the run saved format %d, violations %v", broken.Format, broken.Violations)
	}
	run0 := &broken.Runs[0].Metrics
	p := run0.Workloads["producer"]
	p.Acked++
	run0.Workloads["producer"] = p
	bad := filepath.Join(dir, "bad.json")
	if err := broken.Save(bad); err != nil {
		t.Fatal(err)
	}
	broken.Format = 0
	old := filepath.Join(dir, "old.json")
	if err := broken.Save(old); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.json")
	if err := os.WriteFile(junk, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		code int
		want []string
	}{
		{good, exitOK, []string{"every check holds"}},
		{bad, exitAssert, []string{"violation: run 1: phases-partition-run: producer: acked is 11 in the run, the phases sum to 10 (10)", "2 violations"}},
		{old, exitOK, []string{"result format 1", "does not apply: phases-partition-run", "every check holds"}},
		{junk, exitBadPlan, nil},
	} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"report", "--check", tc.file}, &stdout, &stderr)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d\n%s%s", filepath.Base(tc.file), code, tc.code, stdout.String(), stderr.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%s: output lacks %q:\n%s", filepath.Base(tc.file), w, stdout.String())
			}
		}
	}
}
