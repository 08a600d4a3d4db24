#!/usr/bin/env bash
# Memory of a long run: planrun's resident set size (VmRSS, KiB = 2^10
# bytes) once a minute while a Kafka producer sends SIZE-byte messages at
# RATE msg/s and a consumer group receives them, against one kfake broker
# (bench/kafka -serve) in a process of its own, so that what the broker
# stores is not counted as planrun's.
#   bash bench/rss/run.sh [RATE] [MINUTES] [SIZE]   # default 20000 msg/s, 10 minutes, 100 B
#   PLANRUN=/path/to/planrun bash bench/rss/run.sh  # measure another build of planrun
# The default size is small because kfake keeps every message in memory
# (20,000 msg/s x 10 min x 100 B = 1.2 GB in the broker's process);
# planrun reuses its send buffers, so its own memory hardly depends on it.
# Prints RSS at each minute, then minute 1 against the last minute and the
# growth between them.
set -euo pipefail
RATE=${1:-20000}
MINUTES=${2:-10}
SIZE=${3:-100}
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
pid= kpid=
trap 'kill $pid $kpid 2>/dev/null || true; rm -rf "$tmp"' EXIT
bin=${PLANRUN:-}
if [ -z "$bin" ]; then
  go build -o "$tmp/planrun" .
  bin=$tmp/planrun
fi
go build -o "$tmp/kafka-bench" ./bench/kafka
"$tmp/kafka-bench" -serve -partitions 8 >"$tmp/kfake.out" &
kpid=$!
until [ -s "$tmp/kfake.out" ]; do sleep 0.1; done
addr=$(head -1 "$tmp/kfake.out")
cat >"$tmp/plan.yaml" <<PLAN
name: rss-bench
targets:
  kafka: { driver: kafka, brokers: "$addr", topics: { t: { partitions: 8 } } }
workloads:
  producer: { produce: { topic: t, size: ${SIZE}B, threads: 400, rate: $RATE } }
  consumer: { consume: { topic: t } }
progress: 0s
steps:
  - start: [consumer, producer]
  - sleep: $((MINUTES*60+5))s
  - stop: all
PLAN
"$bin" run --out "$tmp/reports" "$tmp/plan.yaml" >"$tmp/out.txt" 2>&1 &
pid=$!
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
echo "planrun run: kafka on kfake (own process), $SIZE B messages at $RATE msg/s, producer and consumer group, $MINUTES min; planrun's RSS in KiB"
first=
for m in $(seq 1 "$MINUTES"); do
  sleep 60
  r=$(rss)
  [ -z "$first" ] && first=$r
  echo "minute $m: $r KiB"
done
wait "$pid" || { cat "$tmp/out.txt"; exit 1; }
grep -E "producer|consumer" "$tmp/out.txt" | tail -4
awk -v a="$first" -v b="$r" -v m="$MINUTES" 'BEGIN { printf "RSS minute 1: %d KiB, minute %d: %d KiB, growth %+d KiB (%+.1f%%)\n", a, m, b, b-a, 100*(b-a)/a }'
