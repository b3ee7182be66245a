#!/usr/bin/env bash
# Tail latency at a fixed rate: open-loop sends (`petrel bench produce --rate`, latency counted
# from each message's intended send time) against Apache RocketMQ 5.5.0 and `petrel serve`, in
# alternation (A B A B …) on this machine, 16 producers, 1 KiB, a topic of 4 queues, both flush
# modes. The rate is meant to be half of what RocketMQ sustains in that mode (see
# scripts/bench-official.sh). Prints one row per run and the medians of P99, P99.9, P99.99 and max.
#
#   scripts/bench-tail.sh [OUT]
#     env: RATE_ASYNC_FLUSH=4800 RATE_SYNC_FLUSH=1600 ROUNDS=3 DURATION=60 WARMUP=10
#          MODES="ASYNC_FLUSH SYNC_FLUSH"
#
# Not part of the suite: about 2 × ROUNDS × 2 × (DURATION + WARMUP) s plus start-ups.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-results/tail}
rounds=${ROUNDS:-3}
duration=${DURATION:-60}
warmup=${WARMUP:-10}
modes=${MODES:-"ASYNC_FLUSH SYNC_FLUSH"}
export REF_NAMESRV_PORT=39876 REF_BROKER_PORT=39911
source scripts/lib/side-by-side.sh
mkdir -p "$out"

# one LABEL NAMESRV PID FLUSH RATE ROUND: one open-loop run; prints its row.
one() {
  local label=$1 ns=$2 pid=$3 flush=$4 rate=$5 round=$6
  local name="tail-$flush-$label-$round"
  target/release/petrel bench produce -n "$ns" -t TailBench --queues 4 -p 16 -s 1024 --mode sync \
    --rate "$rate" --warmup "$warmup" --duration "$duration" --no-progress --broker-pid "$pid" \
    --out "$out" --label "$name" >"$out/$name.txt" 2>&1
  json "$out/$name.json" "'| $flush | $label | $round | %.0f | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %d |' % (d['tps'], d['send_us']['p99'] / 1e3, d['send_us']['p999'] / 1e3, d['send_us']['p9999'] / 1e3, d['send_us']['max'] / 1e3, sum(d['errors'].values()))" |
    tee -a "$out/rows.md"
}

rm -f "$out/rows.md"
echo "| flush | broker | round | msg/s | P99 | P99.9 | P99.99 | max | errors |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
for flush in $modes; do
  rate_var="RATE_$flush"
  default_rate=4800
  [ "$flush" = SYNC_FLUSH ] && default_rate=1600
  rate=${!rate_var:-$default_rate}
  scripts/reference-rocketmq.sh start "$flush" >/dev/null
  ref_pid=$(tail -1 "$REF_STATE_DIR/pids")
  start_petrel 39877 39921 --set "flushDiskType=$flush"
  for round in $(seq 1 "$rounds"); do
    one rocketmq "127.0.0.1:$REF_NAMESRV_PORT" "$ref_pid" "$flush" "$rate" "$round"
    one petrel 127.0.0.1:39877 "$petrel_pid" "$flush" "$rate" "$round"
  done
  kill "$petrel_pid"
  wait "$petrel_pid" || true
  petrel_pid=""
  scripts/reference-rocketmq.sh stop >/dev/null
done

echo
echo "Medians over the rounds:"
echo
python3 - "$out/rows.md" <<'PY'
import statistics, sys
rows = [l.strip().strip('|').split('|') for l in open(sys.argv[1]) if l.startswith('|')]
cells = {}
for r in rows:
    r = [c.strip() for c in r]
    cells.setdefault((r[0], r[1]), []).append(r)
ms = lambda s: float(s.split()[0])
print("| flush | broker | msg/s | P99 | P99.9 | P99.99 | max |")
print("|---|---|---:|---:|---:|---:|---:|")
for (flush, broker), rs in cells.items():
    med = lambda i: statistics.median(ms(r[i]) for r in rs)
    print(f"| {flush} | {broker} | {statistics.median(float(r[3]) for r in rs):,.0f} | {med(4):.2f} ms | {med(5):.2f} ms | {med(6):.2f} ms | {med(7):.2f} ms |")
PY
