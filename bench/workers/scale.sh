#!/usr/bin/env bash
# Scale of planrun workers: the MQTT connections one worker holds against
# those of three, every worker process under the same limits.
#   bash bench/workers/scale.sh [OPEN_FILES] [SECONDS] [CLIENT]
# Each worker runs with GOMAXPROCS=1 and a limit of OPEN_FILES open files
# (soft and hard: Go raises the soft limit to the hard one; default 1024,
# the usual default of a Linux process), which bounds the connections one
# process can hold. The plan asks for four
# times OPEN_FILES clients, more than three workers can hold, at a connect
# rate of OPEN_FILES/s in all, against mochi-mqtt in a process of its own
# (bench/mqtt-connections -serve-broker, open-files limit raised to the hard
# limit). It is run once on one worker and once on three; the figure is the
# highest number of connected clients in the run's per-second series, and
# the second of the run it was first seen in. CLIENT is the MQTT client (paho, lean).
set -euo pipefail
FILES=${1:-1024}
SECS=${2:-10}
CLIENT=${3:-paho}
CLIENTS=$((4*FILES))
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
cleanup() {
  for f in "$tmp"/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
go build -o "$tmp/planrun" .
go build -o "$tmp/broker" ./bench/mqtt-connections
mkfifo "$tmp/broker.in"
"$tmp/broker" -serve-broker <"$tmp/broker.in" >"$tmp/broker.out" &
echo $! >"$tmp/broker.pid"
exec 3>"$tmp/broker.in" # the broker runs until this is closed
until [ -s "$tmp/broker.out" ]; do sleep 0.05; done
URL=$(head -1 "$tmp/broker.out")

cat >"$tmp/plan.yaml" <<PLAN
name: workers-scale
targets:
  mq: { driver: mqtt, url: "$URL", client: $CLIENT }
workloads:
  fleet:
    connect: { clients: $CLIENTS, connect_rate: $FILES, keepalive: 60s }
progress: 0s
steps:
  - start: fleet
  - wait: fleet.gauges.connected >= $CLIENTS
    timeout: ${SECS}s
    on_timeout: continue
  - sleep: 2s
  - stop: fleet
PLAN

# run N: N workers under the limits, the plan on them; prints the figures.
run() {
  local n=$1 addrs=() i port
  for i in $(seq 0 $((n-1))); do
    port=$((17600+i))
    ( ulimit -n "$FILES"; GOMAXPROCS=1 exec "$tmp/planrun" worker --listen 127.0.0.1:$port --token bench ) >"$tmp/w$i.out" 2>&1 &
    echo $! >"$tmp/w$i.pid"
    addrs+=(127.0.0.1:$port)
  done
  for i in $(seq 0 $((n-1))); do
    until grep -q listening "$tmp/w$i.out"; do sleep 0.05; done
  done
  local list
  list=$(IFS=,; echo "${addrs[*]}")
  rm -rf "$tmp/out"
  "$tmp/planrun" run --quiet --token bench --workers "$list" --out "$tmp/out" "$tmp/plan.yaml" >/dev/null 2>"$tmp/cond.err" || true
  for i in $(seq 0 $((n-1))); do kill "$(cat "$tmp/w$i.pid")" 2>/dev/null || true; wait "$(cat "$tmp/w$i.pid")" 2>/dev/null || true; rm -f "$tmp/w$i.pid"; done
  python3 - "$tmp/out/workers-scale.series.jsonl" "$n" <<'PY'
import json, sys
peak, at, fails = 0, 0.0, 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("workload") != "fleet":
        continue
    g = r.get("gauges") or {}
    if g.get("connected", 0) > peak:
        peak, at = int(g["connected"]), r["t"]
    fails = max(fails, int(g.get("connect_failures", 0)))
print(f"{sys.argv[2]} {peak} {at:.1f} {fails}")
PY
}
echo "planrun $(git describe --always --dirty 2>/dev/null || echo '?'), $(nproc) CPUs, per worker: GOMAXPROCS=1, open files $FILES; plan: $CLIENTS $CLIENT clients at $FILES connections/s"
read -r n1 c1 t1 f1 < <(run 1)
read -r n3 c3 t3 f3 < <(run 3)
printf '%-8s %10s %12s %16s\n' workers connected "first at s" "failed attempts"
printf '%-8s %10s %12s %16s\n' "$n1" "$c1" "$t1" "$f1"
printf '%-8s %10s %12s %16s\n' "$n3" "$c3" "$t3" "$f3"
echo "three workers hold $(echo "scale=2; $c3 / $c1" | bc)x the connections of one"
