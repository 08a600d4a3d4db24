package rocketmq

import (
	"testing"

	"github.com/planrun/planrun/drivers/drivertest"
)

// The embedded broker keeps its commit log and offsets in a directory, so
// a restart loses nothing it acknowledged.
func TestConformance(t *testing.T) {
	drivertest.Run(t, drivertest.Suite{
		Driver: "rocketmq",
		Start: func(testing.TB) drivertest.Env {
			return drivertest.Env{Target: drivertest.Options{"nameservers": "embedded"}, Broker: drivertest.EmbeddedBroker(true)}
		},
		Refused: drivertest.Options{"nameservers": "127.0.0.1:1"},
		Credentials: func(t testing.TB) drivertest.Credentials {
			const ak, sk, wrong = "bench", "right-secret-1", "wrong-secret-xyz"
			tg := openEmbedded(t, &TargetConfig{AccessKey: ak, SecretKey: sk})
			target := func(secret string) drivertest.Options {
				return drivertest.Options{"nameservers": tg.nameServers[0], "access_key": ak, "secret_key": secret}
			}
			return drivertest.Credentials{Good: target(sk), Bad: target(wrong), Secret: wrong}
		},
	})
}
