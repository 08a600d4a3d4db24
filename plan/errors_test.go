package plan_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/planrun/planrun/plan"
)

func TestPrintError(t *testing.T) {
	broken := strings.Replace(good, "driver: memory", "driver: nosuch", 1)
	broken = strings.Replace(broken, "name: t", "name: t\nnosuchkey: 1", 1)
	_, _, err := plan.Parse("plan.yaml", []byte(broken), plan.Options{})
	if err == nil {
		t.Fatal("a broken plan parsed")
	}
	var b bytes.Buffer
	plan.PrintError(&b, err)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("want one line per mistake, got:\n%s", b.String())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "plan.yaml:") {
			t.Errorf("line %q does not start with file:line:col", l)
		}
	}

	b.Reset()
	plan.PrintError(&b, errors.New("open x.yaml: no such file"))
	if got, want := b.String(), "planrun: open x.yaml: no such file\n"; got != want {
		t.Errorf("other error printed as %q, want %q", got, want)
	}
}
