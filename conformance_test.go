package main

import (
	"testing"

	"github.com/planrun/planrun/drivers/drivertest"
)

// Every driver the binary registers (drivers_all.go) runs the driver
// conformance suite in its own package's tests: a driver added without
// one fails here.
func TestEveryDriverRunsConformance(t *testing.T) {
	drivertest.CheckCovered(t, ".")
}
