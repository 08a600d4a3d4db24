package rabbitmq

import (
	"net/url"
	"testing"

	"github.com/planrun/planrun/drivers/drivertest"
	"github.com/planrun/planrun/internal/testenv"
)

// realRabbit is the rabbitmq-server node of .ci/services.sh: its URL and
// node name; outside CI the test skips without it.
func realRabbit(t testing.TB) (string, string) {
	t.Helper()
	return testenv.Broker(t, "PLANRUN_TEST_RABBITMQ"), testenv.Broker(t, "PLANRUN_TEST_RABBITMQ_NODE")
}

// Queues the suite names are declared as durable classic queues and its
// messages are persistent: the broker restart (rabbitmqctl stop_app and
// start_app on the test node) loses nothing the broker confirmed.
func TestConformance(t *testing.T) {
	drivertest.Run(t, drivertest.Suite{
		Driver:  "rabbitmq",
		Produce: drivertest.Options{"persistent": true},
		Start: func(t testing.TB) drivertest.Env {
			u, node := realRabbit(t)
			return drivertest.Env{
				Target: drivertest.Options{"url": u, "reconnect_interval": "500ms"},
				Broker: &drivertest.Broker{
					Stop:    "{exec: [rabbitmqctl, -q, -n, " + node + ", stop_app]}",
					Start:   "{exec: [rabbitmqctl, -q, -n, " + node + ", start_app]}",
					Durable: true,
				},
			}
		},
		Refused: drivertest.Options{"url": "amqp://guest:guest@127.0.0.1:1/", "connect_timeout": "2s"},
		Credentials: func(t testing.TB) drivertest.Credentials {
			raw, _ := realRabbit(t)
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			const wrong = "not-guests-password"
			bad := *u
			bad.User = url.UserPassword(u.User.Username(), wrong)
			return drivertest.Credentials{Good: drivertest.Options{"url": raw}, Bad: drivertest.Options{"url": bad.String()}, Secret: wrong}
		},
	})
}
