#!/usr/bin/env bash
# Conductor overhead and scale of planrun workers on this machine.
#   bash bench/workers/run.sh [WORKERS] [RATE_PER_WORKER] [SECONDS]
#   TLS=1 bash bench/workers/run.sh ...   the same with TLS on the control
#                                         channel (certificates from planrun certs)
# Starts WORKERS local worker processes, runs a memory-driver producer at
# RATE_PER_WORKER msg/s on each for SECONDS, and prints the CPU seconds of
# the conductor and of the workers (from /proc), the conductor's CPU as a
# share of the workers', and the control traffic: the bytes the conductor
# received from the workers (their figures, in a long poll) and sent them
# during the run, from the report's workers list, per second of the run;
# and the start skew: how far apart the workers' first acknowledged
# messages are, on the conductor's clock.
set -euo pipefail
N=${1:-8}
RATE=${2:-50000}
SECS=${3:-20}
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'kill $(cat "$tmp"/*.pid 2>/dev/null) 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/planrun" .
wtls=() ctls=()
if [ -n "${TLS:-}" ]; then
  "$tmp/planrun" certs "$tmp/certs" >/dev/null
  wtls=(--tls-cert "$tmp/certs/worker.crt" --tls-key "$tmp/certs/worker.key" --tls-ca "$tmp/certs/ca.crt")
  ctls=(--tls-cert "$tmp/certs/conductor.crt" --tls-key "$tmp/certs/conductor.key" --tls-ca "$tmp/certs/ca.crt")
fi
addrs=()
for i in $(seq 0 $((N-1))); do
  port=$((17500+i))
  "$tmp/planrun" worker --listen 127.0.0.1:$port --token bench "${wtls[@]}" >"$tmp/w$i.out" 2>/dev/null &
  echo $! >"$tmp/w$i.pid"
  addrs+=(127.0.0.1:$port)
done
for i in $(seq 0 $((N-1))); do
  until grep -q listening "$tmp/w$i.out"; do sleep 0.05; done
done
cat >"$tmp/plan.yaml" <<PLAN
name: workers-bench
targets:
  mem: { driver: memory }
workloads:
  producer:
    produce: { topic: t, size: 100B, threads: $((N*4)), rate: $((N*RATE)) }
progress: 0s
steps:
  - start: producer
  - sleep: ${SECS}s
  - stop: producer
PLAN
cpu() { awk '{print ($14+$15)/100}' "/proc/$1/stat"; }
declare -A w0
for i in $(seq 0 $((N-1))); do w0[$i]=$(cpu "$(cat "$tmp/w$i.pid")"); done
IFS=, ; list="${addrs[*]}"; unset IFS
TIMEFORMAT='%U %S'
{ time "$tmp/planrun" run --quiet --token bench "${ctls[@]}" --workers "$list" --out "$tmp/out" "$tmp/plan.yaml" >/dev/null 2>"$tmp/cond.err"; } 2>"$tmp/cond.time" || true
ccpu=$(awk '{print $1+$2}' "$tmp/cond.time")
wsum=0
for i in $(seq 0 $((N-1))); do
  d=$(echo "$(cpu "$(cat "$tmp/w$i.pid")") - ${w0[$i]}" | bc)
  wsum=$(echo "$wsum + $d" | bc)
done
read -r acked secs rx tx skew < <(python3 - "$tmp/out/workers-bench.json" <<'PY'
import json, sys
from datetime import datetime
r = json.load(open(sys.argv[1]))["runs"][0]
t = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
secs = (t(r["finished"]) - t(r["started"])).total_seconds()
rx = sum(w["control_received_bytes"] for w in r["workers"])
tx = sum(w["control_sent_bytes"] for w in r["workers"])
firsts = [w["first_message_s"] for w in r["workers"] if w.get("first_message_s")]
skew = (max(firsts) - min(firsts)) * 1000 if firsts else -1
print(r["metrics"]["workloads"]["producer"]["acked"], round(secs, 2), rx, tx, round(skew, 1))
PY
)
echo "workers=$N rate/worker=$RATE seconds=$SECS acked=$acked run=${secs}s"
echo "workers CPU s (sum)=$wsum"
echo "conductor CPU s=$ccpu"
echo "conductor share of workers' CPU: $(echo "scale=2; 100 * $ccpu / $wsum" | bc)%"
echo "start skew: the workers' first acknowledged messages span ${skew} ms (conductor's clock)"
echo "control traffic: conductor received $rx bytes ($(echo "scale=1; $rx / $secs / 1000" | bc) kB/s, $(echo "scale=1; $rx / $secs / 1000 / $N" | bc) kB/s per worker), sent $tx bytes ($(echo "scale=1; $tx / $secs / 1000" | bc) kB/s)"
