package amqp

import (
	"testing"

	"github.com/planrun/planrun/drivers/drivertest"
	"github.com/planrun/planrun/internal/testenv"
)

// The suite runs against RabbitMQ 3.10's AMQP 1.0 plugin on the node of
// .ci/services.sh; a bare address there is a queue the plugin declares
// (not durable: the broker restart may lose what the queue held, and the
// suite then checks the loss is counted). Credit covers every message of
// a check.
func TestConformance(t *testing.T) {
	real := func(t testing.TB) (string, string) {
		t.Helper()
		return testenv.Broker(t, "PLANRUN_TEST_AMQP"), testenv.Broker(t, "PLANRUN_TEST_RABBITMQ_NODE")
	}
	drivertest.Run(t, drivertest.Suite{
		Driver:  "amqp",
		Produce: drivertest.Options{"durable": true},
		Start: func(t testing.TB) drivertest.Env {
			u, node := real(t)
			return drivertest.Env{
				Target: drivertest.Options{"url": u, "username": "guest", "password": "guest", "reconnect_interval": "500ms"},
				Broker: &drivertest.Broker{
					Stop:  "{exec: [rabbitmqctl, -q, -n, " + node + ", stop_app]}",
					Start: "{exec: [rabbitmqctl, -q, -n, " + node + ", start_app]}",
				},
			}
		},
		Refused: drivertest.Options{"url": "amqp://127.0.0.1:1", "connect_timeout": "2s"},
		Credentials: func(t testing.TB) drivertest.Credentials {
			u, _ := real(t)
			const wrong = "not-guests-password"
			return drivertest.Credentials{
				Good:   drivertest.Options{"url": u, "username": "guest", "password": "guest"},
				Bad:    drivertest.Options{"url": u, "username": "guest", "password": wrong},
				Secret: wrong,
			}
		},
	})
}
