package mqtt

import (
	"testing"

	"github.com/planrun/planrun/drivers/drivertest"
)

// Every client (paho, lean, lean speaking MQTT 5) passes the suite on the
// embedded mochi broker, on mosquitto and on ActiveMQ (.ci/services.sh).
// A consumer keeps its position through a persistent session
// (clean_session: false with a fixed client id). The broker restart runs on
// the embedded broker and on the mosquitto .ci/services.sh starts for
// tests to kill (killed with SIGKILL, started again); neither keeps what
// it held across the restart.
func TestConformance(t *testing.T) {
	brokers := []struct {
		name, env string
	}{{"embedded", ""}, {"mosquitto", "PLANRUN_TEST_MOSQUITTO"}, {"activemq", "PLANRUN_TEST_ACTIVEMQ"},
		{"mosquitto-restart", "PLANRUN_TEST_MOSQUITTO_RESTART"}}
	for _, cl := range clients {
		for _, b := range brokers {
			t.Run(cl+"/"+b.name, func(t *testing.T) {
				target := drivertest.Options{"client": cl, "connect_timeout": "5s", "reconnect_interval": "500ms"}
				if cl == clientLean5 {
					target["client"], target["protocol_version"] = clientLean, 5
				}
				s := drivertest.Suite{
					Driver:    "mqtt",
					Positions: drivertest.Options{"clean_session": false, "client_id": unique("planrun-conformance") + "-{group}-{client}"},
					Refused:   target.With(drivertest.Options{"url": "tcp://127.0.0.1:1"}),
					Messages:  1000,
				}
				if b.env == "" {
					s.Start = func(testing.TB) drivertest.Env {
						return drivertest.Env{Target: target.With(drivertest.Options{"url": Embedded}), Broker: drivertest.EmbeddedBroker(false)}
					}
					s.Credentials = func(t testing.TB) drivertest.Credentials {
						const pass, wrong = "s3cret-pass", "wrong-pass-xyz"
						tg := mustOpen(t, variant(&TargetConfig{Client: cl, URL: Embedded, Username: "alice", Password: pass}))
						creds := func(p string) drivertest.Options {
							return target.With(drivertest.Options{"url": tg.server.String(), "username": "alice", "password": p})
						}
						return drivertest.Credentials{Good: creds(pass), Bad: creds(wrong), Secret: wrong}
					}
				} else {
					s.Start = func(st testing.TB) drivertest.Env {
						t := st.(*testing.T)
						if b.name == "activemq" {
							needs311(t, cl, "ActiveMQ")
						}
						env := drivertest.Env{Target: target.With(drivertest.Options{"url": realBroker(t, b.env)})}
						if b.name == "mosquitto-restart" {
							// Killed and started again: it keeps nothing.
							env.Broker = drivertest.ProcessBroker(realBroker(t, b.env+"_PIDFILE"), realBroker(t, b.env+"_START"), false)
						}
						return env
					}
				}
				drivertest.Run(t, s)
			})
		}
	}
}
