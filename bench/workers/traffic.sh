#!/usr/bin/env bash
# Control traffic and conductor CPU of planrun workers during a publish phase.
#   bash bench/workers/traffic.sh fleet  [SECONDS] [CLIENTS] [WORKERS]
#   bash bench/workers/traffic.sh memory [SECONDS] [RATE_PER_WORKER] [WORKERS]
# fleet: WORKERS (default 3) local workers run an MQTT fleet of CLIENTS
# (default 3,000) clients, each publishing one QoS 1 message of 200 B per
# second to devices/{client}/data, and a consumer on worker 0 reading
# devices/+/data, against a mosquitto of its own on loopback (port 17890).
# memory: WORKERS (default 8) local workers each run a memory-driver producer
# at RATE_PER_WORKER (default 50,000) msg/s of 100 B.
# The publish phase lasts SECONDS (default 60); a shell step at its start and
# at its end reads, on the machine's own counters:
#   - the bytes the conductor's control sockets received (TCP payload, from
#     the kernel: ss's bytes_received on the sockets to the workers' ports);
#   - the CPU time of the conductor and of every worker (/proc/PID/stat).
# It prints bytes per message (received bytes / (acked + received) in the
# phase, from the report), kB/s per worker, and the conductor's CPU as a
# share of the workers', the run's start and report excluded.
set -euo pipefail
MODE=${1:-fleet}
SECS=${2:-60}
case $MODE in
fleet) CLIENTS=${3:-3000}; N=${4:-3} ;;
memory) RATE=${3:-50000}; N=${4:-8} ;;
*) echo "usage: $0 fleet|memory [SECONDS] [CLIENTS|RATE] [WORKERS]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
cleanup() {
  for f in "$tmp"/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
go build -o "$tmp/planrun" .
BASE=17700
addrs=()
for i in $(seq 0 $((N-1))); do
  port=$((BASE+i))
  "$tmp/planrun" worker --listen 127.0.0.1:$port --token bench >"$tmp/w$i.out" 2>&1 &
  echo $! >"$tmp/w$i.pid"
  addrs+=(127.0.0.1:$port)
done
for i in $(seq 0 $((N-1))); do
  until grep -q listening "$tmp/w$i.out"; do sleep 0.05; done
done

if [ "$MODE" = fleet ]; then
  command -v mosquitto >/dev/null || { echo "mosquitto is not installed (apt-get install mosquitto)" >&2; exit 1; }
  cat >"$tmp/mosquitto.conf" <<CONF
listener 17890 127.0.0.1
allow_anonymous true
max_connections -1
max_inflight_messages 0
max_queued_messages 100000
persistence false
CONF
  mosquitto -c "$tmp/mosquitto.conf" >"$tmp/mosquitto.out" 2>&1 &
  echo $! >"$tmp/mosquitto.pid"
  until ss -ltnH 'sport = :17890' | grep -q .; do sleep 0.05; done
  cat >"$tmp/plan.yaml" <<PLAN
name: traffic
targets:
  mq: { driver: mqtt, url: "tcp://127.0.0.1:17890" }
workloads:
  devices:
    produce:
      topic: devices/{client}/data
      size: 200B
      qos: 1
      clients: $CLIENTS
      connect_rate: 1000
      connect_first: true
      interval: 1s
      threads: 60
  sink:
    on: [0]
    consume: { topic: devices/+/data, qos: 1 }
progress: 0s
steps:
  - start: sink
  - start: devices
  - wait: devices.gauges.connected >= $CLIENTS
    timeout: 120s
  - sleep: 5s
  - phase: publish
  - shell: bash $tmp/mark.sh start
  - sleep: ${SECS}s
  - shell: bash $tmp/mark.sh end
  - stop: devices
    phase: settle
  - wait: sink.received >= devices.acked
    timeout: 10s
    on_timeout: continue
  - stop: all
PLAN
else
  cat >"$tmp/plan.yaml" <<PLAN
name: traffic
targets:
  mem: { driver: memory }
workloads:
  producer:
    produce: { topic: t, size: 100B, threads: $((N*4)), rate: $((N*RATE)) }
progress: 0s
steps:
  - start: producer
  - sleep: 3s
  - phase: publish
  - shell: bash $tmp/mark.sh start
  - sleep: ${SECS}s
  - shell: bash $tmp/mark.sh end
  - stop: producer
    phase: settle
PLAN
fi

# mark.sh NAME: the conductor's received control bytes and the CPU seconds
# of the conductor and the workers, now.
filter=""
for i in $(seq 0 $((N-1))); do filter+="${filter:+ or }dport = :$((BASE+i))"; done
cat >"$tmp/mark.sh" <<MARK
set -e
cpu() { awk '{print (\$14+\$15)/100}' "/proc/\$1/stat"; }
rx=\$(ss -tinH state established "( $filter )" | grep -o 'bytes_received:[0-9]*' | cut -d: -f2 | awk '{s+=\$1} END {print s+0}')
w=0
for f in $tmp/w*.pid; do w=\$(echo "\$w + \$(cpu \$(cat \$f))" | bc); done
echo "\$rx \$(cpu \$(cat $tmp/cond.pid)) \$w \$(date +%s.%N)" >"$tmp/mark.\$1"
MARK

IFS=, ; list="${addrs[*]}"; unset IFS
"$tmp/planrun" run --quiet --token bench --workers "$list" --out "$tmp/out" "$tmp/plan.yaml" >/dev/null 2>"$tmp/cond.err" &
echo $! >"$tmp/cond.pid"
wait "$(cat "$tmp/cond.pid")" || { echo "run failed:"; cat "$tmp/cond.err"; }
rm -f "$tmp/cond.pid"
read -r rx0 c0 w0 t0 <"$tmp/mark.start"
read -r rx1 c1 w1 t1 <"$tmp/mark.end"
read -r msgs acked received reordered lost < <(python3 - "$tmp/out/traffic.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
ph = [p for p in r["metrics"]["phases"] if p["name"] == "publish"][0]
acked = sum(w.get("acked", 0) for w in ph["workloads"].values())
received = sum(w.get("received", 0) for w in ph["workloads"].values())
reordered = sum(w.get("reordered", 0) for w in r["metrics"]["workloads"].values())
lost = sum(w.get("lost", 0) for w in r["metrics"]["workloads"].values())
print(acked + received, acked, received, reordered, lost)
PY
)
secs=$(echo "$t1 - $t0" | bc)
rx=$((rx1 - rx0))
ccpu=$(echo "$c1 - $c0" | bc)
wcpu=$(echo "$w1 - $w0" | bc)
echo "planrun $(git describe --always --dirty 2>/dev/null || echo '?'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$MODE" = fleet ]; then
  echo "mode=fleet workers=$N clients=$CLIENTS publish phase=${secs}s acked=$acked received=$received"
else
  echo "mode=memory workers=$N rate/worker=$RATE publish phase=${secs}s acked=$acked received=$received"
fi
echo "run: reordered $reordered, lost $lost"
echo "control bytes the conductor received: $rx ($(echo "scale=2; $rx / $secs / 1000 / $N" | bc) kB/s per worker)"
echo "bytes per message (acked + received): $(echo "scale=2; $rx / $msgs" | bc)"
echo "CPU s in the phase: workers $wcpu, conductor $ccpu; conductor share of workers' CPU: $(echo "scale=2; 100 * $ccpu / $wcpu" | bc)%"
