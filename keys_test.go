package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/planrun/planrun/internal/testenv"
)

// keys: sequence gives every message of a run a key of its own, over
// threads, workloads and the shards of a workload on several workers: 1,000
// messages from 4 threads written into a real Redis hash by their keys
// (HSET hash key value) leave 1,000 fields, directly and through a relay.
func TestSequenceKeysUniqueInRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	addr := testenv.Broker(t, "PLANRUN_TEST_REDIS")
	const count = 1000
	head := `name: keys
targets:
  mem: { driver: memory }
  redis: { driver: redis, addr: "%s" }
workloads:
%s
progress: 0s
steps:
  - probe: redis
    command: [DEL, %s]
    as: deleted
  - start: all
  - wait: %s >= %d
    timeout: 60s
  - stop: all
  - probe: redis
    command: [HLEN, %s]
    as: hlen
`
	producer := func(target, topic string) string {
		return fmt.Sprintf("  producer: { target: %s, produce: { topic: %s, threads: 4, rate: 2000, count: %d, keys: sequence, size: 64B } }", target, topic, count)
	}
	cases := []struct {
		name, workloads, done string
		workers               int
	}{
		{"producer", producer("redis", "HASH"), "producer.acked", 0},
		{"relay", producer("mem", "t") + "\n  relay: { target: mem, relay: { from: { topic: t }, to: { target: redis, topic: HASH, command: hset } } }", "relay.acked", 0},
		{"producer over 2 workers", producer("redis", "HASH"), "producer.acked", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hash := "planrun_test_keys_" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
			plan := fmt.Sprintf(head, addr, strings.ReplaceAll(c.workloads, "HASH", hash), hash, c.done, count, hash)
			args := []string{"-q", "--out", t.TempDir()}
			if c.workers > 0 {
				addrs, _ := startWorkers(t, c.workers)
				args = append(args, "--workers", strings.Join(addrs, ","), "--token", "t0k")
			}
			var stdout, stderr bytes.Buffer
			if code := run(append(args, writePlan(t, plan)), &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), fmt.Sprintf("probe hlen = %d\n", count)) {
				t.Errorf("HLEN %s is not %d: keys of %d messages from 4 threads collided\n%s", hash, count, count, stdout.String())
			}
		})
	}
}
