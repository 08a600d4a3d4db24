package kafka_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/planrun/planrun/drivers/drivertest"
)

func TestConformance(t *testing.T) {
	drivertest.Run(t, drivertest.Suite{
		Driver: "kafka",
		Start: func(testing.TB) drivertest.Env {
			return drivertest.Env{Target: drivertest.Options{"brokers": "embedded"}, Broker: drivertest.EmbeddedBroker(true)}
		},
		Refused:     drivertest.Options{"brokers": "127.0.0.1:1", "dial_timeout": "300ms"},
		Credentials: saslCluster,
	})
}

// saslCluster starts a kfake cluster of its own that demands SCRAM.
func saslCluster(t testing.TB) drivertest.Credentials {
	cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "bench", "right-one"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	target := func(password string) drivertest.Options {
		return drivertest.Options{
			"brokers":      strings.Join(cl.ListenAddrs(), ","),
			"dial_timeout": "1s",
			"sasl":         drivertest.Options{"mechanism": "SCRAM-SHA-256", "user": "bench", "password": password},
		}
	}
	return drivertest.Credentials{Good: target("right-one"), Bad: target("wrong-pass-xyz"), Secret: "wrong-pass-xyz"}
}
