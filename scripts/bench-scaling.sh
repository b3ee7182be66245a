#!/usr/bin/env bash
# The scaling study for a many-core machine (16 cores or more): does `petrel serve` grow with
# cores, producers and queues, and which put-message lock wins when the cores are real?
#
#   scripts/bench-scaling.sh [OUT]
#     env: BIN=target/release/petrel  DURATION=5 WARMUP=1 (seconds per cell)
#          BUDGET_S=330 (no new cell starts after this many seconds; the table says what was cut)
#          LOADGEN_CPUS=8-15 (the load generator's cores; the broker gets 0..N-1 in part 1)
#          DATA=/tmp/petrel-scaling (the brokers' data; removed after each cell)
#          PARTS="cores grid locks" (which parts to run)  LOCK_SIZES=2,1024 (part 3's bodies)
#
# 1. cores: the broker pinned (taskset) to 1, 2, 4 and 8 cores, the load generator on the other
#    8; 1 KiB, ASYNC_FLUSH, 16 queues; 64 synchronous producers, and 16 producers with 64 sends
#    in flight each. Throughput and broker CPU against cores.
# 2. grid: the broker on cores 0-7; producers 1, 4, 16, 64 against topics of 4, 64 and 1,024
#    queues (1 KiB, ASYNC_FLUSH, synchronous sends).
# 3. locks: `petrel bench lock-study`, 2 B and 1 KiB, producers 1-64, both flush modes, one
#    round of 2 s cells; the four brokers unpinned.
#
# Each cell is one fresh broker and one `petrel bench produce`; every report (JSON and Markdown)
# lands in OUT, with OUT/summary.md, the tables. Needs only the binary, bash, taskset and python3.
# Not part of the suite: about 6 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/petrel}
OUT=${1:-bench-results/scaling}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
BUDGET_S=${BUDGET_S:-330}
LOADGEN_CPUS=${LOADGEN_CPUS:-8-15}
DATA=${DATA:-/tmp/petrel-scaling}
PARTS=${PARTS:-"cores grid locks"}
LOCK_SIZES=${LOCK_SIZES:-2,1024}
NAMESRV_PORT=39876
BROKER_PORT=39911
mkdir -p "$OUT/reports"
started_s=$(date +%s)
log() { echo "[$(($(date +%s) - started_s))s] $*" | tee -a "$OUT/run.log"; }
in_budget() { [ $(($(date +%s) - started_s)) -lt "$BUDGET_S" ]; }

"$BIN" --version >/dev/null 2>&1 || { log "cannot run $BIN"; exit 1; }
{
  echo "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  echo "kernel: $(uname -r); memory: $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
  echo "data: $DATA on $(df -T "$(dirname "$DATA")" | awk 'NR==2 {print $2}')"
  echo "petrel: $("$BIN" --version)"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt" | tee -a "$OUT/run.log"

# cell LABEL BROKER_CPUS PRODUCERS QUEUES MODE [IN_FLIGHT]: one broker, one measured run.
cell() {
  local label=$1 cpus=$2 producers=$3 queues=$4 mode=$5 in_flight=${6:-64} pid
  if ! in_budget; then
    log "skipped $label (past BUDGET_S=$BUDGET_S)"
    return 0
  fi
  rm -rf "$DATA"
  mkdir -p "$DATA"
  taskset -c "$cpus" "$BIN" serve --store-dir "$DATA/store" \
    --namesrv-listen "127.0.0.1:$NAMESRV_PORT" --listen-port "$BROKER_PORT" --broker-ip 127.0.0.1 \
    --set flushDiskType=ASYNC_FLUSH >"$DATA/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do grep -q "boot success" "$DATA/serve.log" && break; sleep 0.1; done
  taskset -c "$LOADGEN_CPUS" "$BIN" bench produce -n "127.0.0.1:$NAMESRV_PORT" \
    -t "Scale$queues" --queues "$queues" -p "$producers" -m "$mode" --in-flight "$in_flight" \
    -s 1024 --warmup "$WARMUP" -d "$DURATION" --no-progress --broker-pid "$pid" \
    -o "$OUT/reports" -l "$label" >>"$OUT/run.log" 2>&1 || log "$label: bench failed"
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  log "done $label"
}

for part in $PARTS; do
  case $part in
    cores)
      for n in 1 2 4 8; do
        cell "cores-$n-sync64" "0-$((n - 1))" 64 16 sync
        cell "cores-$n-async16x64" "0-$((n - 1))" 16 16 async 64
      done
      ;;
    grid)
      for queues in 4 64 1024; do
        for producers in 1 4 16 64; do
          cell "grid-q$queues-p$producers" 0-7 "$producers" "$queues" sync
        done
      done
      ;;
    locks)
      if in_budget; then
        timeout $((BUDGET_S + 120 - ($(date +%s) - started_s))) \
          "$BIN" bench lock-study --petrel "$BIN" --sizes "$LOCK_SIZES" --producers 1,4,16,64 --rounds 1 \
          --duration 2 --warmup 1 --out "$OUT/locks" --data "$DATA/locks" >>"$OUT/run.log" 2>&1 ||
          log "lock study failed or was cut"
        log "done locks"
      else
        log "skipped locks (past BUDGET_S=$BUDGET_S)"
      fi
      ;;
  esac
done
rm -rf "$DATA"

python3 - "$OUT" <<'PY' >"$OUT/summary.md"
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
rows = {}
for path in sorted((out / "reports").glob("*.json")):
    r = json.loads(path.read_text())
    rows[r["label"]] = r
def row(label):
    r = rows.get(label)
    if r is None:
        return "| " + label + " | not run |||||"
    cpu = (r.get("broker") or {}).get("cpu_pct_mean", 0.0)
    us = cpu / 100 * 1e6 / r["tps"] if r["tps"] else 0.0
    s = r["send_us"]
    errors = sum(r["errors"].values())
    return f"| {label} | {r['tps']:,.0f} | {cpu:.0f}% | {us:.1f} µs | {s['p99']:,} / {s['p9999']:,} µs | {errors} |"
head = "| cell | msg/s | broker CPU (100% = a core) | broker CPU per msg | send P99 / P99.99 | errors |\n|---|---|---|---|---|---|"
print("# Scaling study\n")
print((out / "machine.txt").read_text())
print("## Broker cores (1 KiB, ASYNC_FLUSH, 16 queues)\n")
print(head)
for n in (1, 2, 4, 8):
    for w in ("sync64", "async16x64"):
        print(row(f"cores-{n}-{w}"))
print("\n## Producers × queues (broker on 8 cores, 1 KiB, sync sends)\n")
print(head)
for q in (4, 64, 1024):
    for p in (1, 4, 16, 64):
        print(row(f"grid-q{q}-p{p}"))
locks = out / "locks" / "lock-study.md"
print("\n## Put-message locks\n")
print(locks.read_text() if locks.exists() else "not run")
PY
cat "$OUT/summary.md"
