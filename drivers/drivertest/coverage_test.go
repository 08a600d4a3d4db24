package drivertest

import (
	"os"
	"path/filepath"
	"testing"
)

// A package counts as covered only when a test file runs the suite with
// the driver's name as a literal.
func TestCovers(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      bool
	}{
		{"runs", `package x_test
import ("testing"; "github.com/planrun/planrun/drivers/drivertest")
func TestConformance(t *testing.T) { drivertest.Run(t, drivertest.Suite{Driver: "x"}) }`, true},
		{"renamed import", `package x_test
import ("testing"; dt "github.com/planrun/planrun/drivers/drivertest")
func suite() dt.Suite { return dt.Suite{Driver: "x"} }
func TestConformance(t *testing.T) { dt.Run(t, suite()) }`, true},
		{"other driver", `package x_test
import ("testing"; "github.com/planrun/planrun/drivers/drivertest")
func TestConformance(t *testing.T) { drivertest.Run(t, drivertest.Suite{Driver: "y"}) }`, false},
		{"suite never run", `package x_test
import "github.com/planrun/planrun/drivers/drivertest"
var s = drivertest.Suite{Driver: "x"}`, false},
		{"no conformance test", `package x_test
import "testing"
func TestSomething(t *testing.T) {}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "x_test.go"), []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := Covers(dir, "x")
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("Covers = %v, want %v", got, c.want)
			}
		})
	}
}
