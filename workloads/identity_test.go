package workloads_test

import (
	"fmt"
	"strings"
	"testing"

	_ "github.com/planrun/planrun/drivers/memory"
	_ "github.com/planrun/planrun/drivers/mqtt"
	"github.com/planrun/planrun/engine/enginetest"
	_ "github.com/planrun/planrun/steps"
)

// counts are a receiving workload's final figures; -1 leaves one unchecked.
type counts struct {
	received, distinct, lost, backlog, duplicates, reordered int64
}

// Accounting by message identity, against faults whose effect is known:
// the memory broker drops, duplicates and reorders every Nth message it
// acknowledged, so the exact loss, duplicates, backlog and reordering each
// receiver must report follow from the counts alone. With 1,000 messages,
// drop_every 10 loses 100; duplicate_every 7 repeats the 142 multiples of
// 7, of which 14 are dropped first (128); reorder_every 5 holds back the
// multiples of 5 neither dropped nor repeated (86, each of which arrives
// after the next message).
func TestAccountingByIdentity(t *testing.T) {
	memoryPlan := func(faults string) string {
		return `name: faults
targets:
  mq: { driver: memory, partitions: 1, ` + faults + ` }
workloads:
  producer:
    produce: { topic: a, size: 100B, rate: 20000, count: 1000 }
  consumer:
    consume: { topic: a }
progress: 0s
steps:
  - start: consumer
  - start: producer
  - wait: "!producer.running"
    timeout: 30s
  - wait: consumer.received >= %d
    timeout: 30s
  - stop: all
`
	}
	for _, c := range []struct {
		name string
		plan string
		want map[string]counts
	}{
		{name: "no faults", plan: fmt.Sprintf(memoryPlan("drop_every: 0"), 1000),
			want: map[string]counts{"consumer": {1000, 1000, 0, 0, 0, 0}}},
		{name: "drop", plan: fmt.Sprintf(memoryPlan("drop_every: 10"), 900),
			want: map[string]counts{"consumer": {900, 900, 100, 100, 0, 0}}},
		{name: "duplicate", plan: fmt.Sprintf(memoryPlan("duplicate_every: 7"), 1142),
			want: map[string]counts{"consumer": {1142, 1000, 0, 0, 142, 0}}},
		{name: "reorder", plan: fmt.Sprintf(memoryPlan("reorder_every: 5"), 1000),
			// The 1,000th is held back until the producer closes and still
			// arrives after the 999th: in order.
			want: map[string]counts{"consumer": {1000, 1000, 0, 0, 0, 199}}},
		{name: "all three", plan: fmt.Sprintf(memoryPlan("drop_every: 10, duplicate_every: 7, reorder_every: 5"), 1028),
			want: map[string]counts{"consumer": {1028, 900, 100, 100, 128, 86}}},
		{
			// Templated producer topics (one per MQTT client) read through
			// a wildcard, a relay from a wildcard into the lossy broker, a
			// relay back into MQTT and a $share group of three consumers.
			name: "mqtt templates, wildcards, relays and a share group",
			plan: `name: identity
targets:
  mqtt: { driver: mqtt, url: embedded }
  lossy: { driver: memory, partitions: 1, drop_every: 10, duplicate_every: 7, reorder_every: 5 }
workloads:
  devices:
    target: mqtt
    produce: { topic: "devices/{client}/data", size: 100B, clients: 4, rate: 2000, count: 1000 }
  watcher:
    target: mqtt
    consume: { topic: devices/+/data }
  bridge:
    target: mqtt
    relay: { from: { topic: "devices/#" }, to: { target: lossy, topic: lossy } }
  back:
    target: lossy
    relay: { from: { topic: lossy }, to: { target: mqtt, topic: out/data } }
  s1:
    target: mqtt
    consume: { topic: $share/g/out/# }
  s2:
    target: mqtt
    consume: { topic: $share/g/out/# }
  s3:
    target: mqtt
    consume: { topic: out/#, group: g, shared: true }
  late:
    target: mqtt
    consume: { topic: devices/+/data }
  lateshare:
    target: mqtt
    consume: { topic: $share/h/devices/# }
  latetemplate:
    target: mqtt
    consume: { topic: "devices/{client}/data", clients: 2 }
progress: 0s
steps:
  - start: [watcher, bridge, back, s1, s2, s3]
  - start: devices
  - wait: "!devices.running"
    timeout: 30s
  - wait: watcher.received >= 1000 && s1.received + s2.received + s3.received >= 1028
    timeout: 30s
  - start: [late, lateshare, latetemplate]
  - stop: all
`,
			// The devices' four connections each deliver in order, but one
			// stream's messages go out over all four, so the order across
			// them is the broker's: reordering is checked by the cases above.
			want: map[string]counts{
				"watcher": {1000, 1000, 0, 0, 0, -1},
				"bridge":  {1000, 1000, 0, 0, 0, -1},
				// What the lossy broker did, seen by the relay reading it.
				"back": {1028, 900, 100, 100, 128, -1},
				// The share group expects what back acknowledged (900
				// distinct messages) once, over its three consumers: the
				// repeats back forwarded are its duplicates.
				"s1+s2+s3": {1028, 900, 0, 0, 128, -1},
				// Subscribed once all was sent, with clean sessions: what
				// their subscriptions cover is their backlog, and nothing
				// else. No later message of those streams arrived, so the
				// run cannot prove it lost: it is in flight (a broker that
				// kept a session for them would still deliver it).
				"late":         {0, 0, 0, 1000, 0, 0},
				"lateshare":    {0, 0, 0, 1000, 0, 0},
				"latetemplate": {0, 0, 0, 500, 0, 0},
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := enginetest.Execute(t, c.plan).Runs[0]
			for name, want := range c.want {
				var got counts
				for i, w := range strings.Split(name, "+") {
					s, ok := run.Metrics.Workloads[w]
					if !ok {
						t.Fatalf("no workload %s", w)
					}
					got.received += s.Received
					got.duplicates += s.Duplicates
					got.reordered += s.Reordered
					if i == 0 { // one group: the same figure in each
						got.lost, got.backlog = s.Lost, s.Backlog.Messages
					} else if s.Lost != got.lost || s.Backlog.Messages != got.backlog {
						t.Errorf("%s: lost %d, backlog %d, but %s has lost %d, backlog %d", w, s.Lost, s.Backlog.Messages, name, got.lost, got.backlog)
					}
				}
				got.distinct = got.received - got.duplicates
				if want.reordered < 0 {
					want.reordered = got.reordered
				}
				if got != want {
					t.Errorf("%s: got %+v, want %+v", name, got, want)
				}
			}
		})
	}
}
