package nats

import (
	"testing"

	"github.com/planrun/planrun/drivers/drivertest"
	"github.com/planrun/planrun/internal/testenv"
)

// JetStream producers and durable consumers pass the suite on the
// embedded server (restarted by the broker step, its file stream durable)
// and on Debian's nats-server (.ci/services.sh). The suite's topics are
// one token each, so a stream of subject * stores them all. Core subjects
// keep no position: TestCoreCounts and the plan tests cover them.
func TestConformance(t *testing.T) {
	stream := drivertest.Options{"CONFORMANCE": drivertest.Options{"subjects": []string{"*"}, "storage": "file", "max_age": "1h"}}
	base := drivertest.Options{"reconnect_wait": "100ms", "streams": stream}
	suite := func(start func(t testing.TB) drivertest.Env) drivertest.Suite {
		return drivertest.Suite{
			Driver:   "nats",
			Start:    start,
			Produce:  drivertest.Options{"jetstream": true, "send_timeout": "2s"},
			Consume:  drivertest.Options{"jetstream": true},
			Refused:  drivertest.Options{"url": "nats://127.0.0.1:1"},
			Messages: 1000,
			Credentials: func(t testing.TB) drivertest.Credentials {
				const pass, wrong = "s3cret-pass", "wrong-pass-xyz"
				tg := mustOpen(t, &TargetConfig{URL: Embedded, Username: "alice", Password: pass})
				creds := func(p string) drivertest.Options {
					return base.With(drivertest.Options{"url": tg.URL(), "username": "alice", "password": p})
				}
				return drivertest.Credentials{Good: creds(pass), Bad: creds(wrong), Secret: wrong}
			},
		}
	}
	t.Run("embedded", func(t *testing.T) {
		drivertest.Run(t, suite(func(testing.TB) drivertest.Env {
			return drivertest.Env{Target: base.With(drivertest.Options{"url": Embedded}), Broker: drivertest.EmbeddedBroker(true)}
		}))
	})
	t.Run("nats-server", func(t *testing.T) {
		u := testenv.Broker(t, "PLANRUN_TEST_NATS")
		drivertest.Run(t, suite(func(testing.TB) drivertest.Env {
			return drivertest.Env{Target: base.With(drivertest.Options{"url": u})}
		}))
	})
}
