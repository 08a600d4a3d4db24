package memory_test

import (
	"testing"

	"github.com/planrun/planrun/drivers/drivertest"
)

// The memory driver has no network and no broker process: there is no
// address to be refused, no credentials and nothing to restart.
func TestConformance(t *testing.T) {
	drivertest.Run(t, drivertest.Suite{
		Driver: "memory",
		Start: func(testing.TB) drivertest.Env {
			return drivertest.Env{Target: drivertest.Options{"partitions": 4}}
		},
	})
}
