package redis

import (
	"context"
	"testing"
	"time"

	"github.com/planrun/planrun/drivers/drivertest"
)

// Redis is written to and probed, not consumed: the suite counts what the
// producer acked and HLEN counts what the server holds. It runs on the
// embedded miniredis and on redis-server (.ci/services.sh).
func TestConformance(t *testing.T) {
	for _, server := range []string{"embedded", "redis-server"} {
		t.Run(server, func(t *testing.T) {
			s := drivertest.Suite{
				Driver: "redis",
				Start: func(st testing.TB) drivertest.Env {
					addr := Embedded
					if server != "embedded" {
						addr = realRedis(st.(*testing.T))
					}
					return drivertest.Env{Target: drivertest.Options{"addr": addr}}
				},
				Refused: drivertest.Options{"addr": "127.0.0.1:1", "dial_timeout": "1s"},
				Credentials: func(t testing.TB) drivertest.Credentials {
					const pass, wrong = "pw-1234", "bad-pw-999"
					tg := mustOpen(t.(*testing.T), &TargetConfig{Addr: Embedded, Password: pass})
					creds := func(p string) drivertest.Options { return drivertest.Options{"addr": tg.addr, "password": p} }
					return drivertest.Credentials{Good: creds(pass), Bad: creds(wrong), Secret: wrong}
				},
			}
			// An embedded server lives as long as the run's target, so the
			// server's own count (HLEN) is asked of redis-server.
			if server != "embedded" {
				s.Stored = func(t testing.TB, env drivertest.Env, topic string) int64 {
					return hlen(t, env.Target["addr"].(string), topic)
				}
			}
			drivertest.Run(t, s)
		})
	}
}

func hlen(t testing.TB, addr, key string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tg, err := open(ctx, &TargetConfig{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	v, err := tg.Probe(ctx, []string{"HLEN", key})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := v.(int64)
	return n
}
