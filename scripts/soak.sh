#!/usr/bin/env bash
# The seed study's soak: a broker in a memory cgroup with a hard limit, under send + consume for a
# long time. For each broker in $BROKERS and each body size in $SIZES: a fresh cgroup v1 memory
# group limited to $LIMIT_MIB, the broker started inside it (ASYNC_FLUSH), and `petrel bench soak`
# driving $PRODUCERS synchronous senders at a fixed total rate (open loop: a stall shows as a dip
# and a latency, not as a slower client) and $CONSUMERS pulling consumers, sampling every second
# the cgroup's usage (anon + page cache), the broker's RSS, the send and consume rates and the OOM
# kills. Writes one table (Markdown) and, per run, SVG plots of rate and memory over time.
#
#   scripts/soak.sh [OUT]       as root, cgroup v1 memory controller
#     env: DURATION_S=1800 LIMIT_MIB=512 SIZES="1024 4096" BROKERS="petrel rocketmq"
#          RATE_1024=8000 RATE_4096=3000, RATE_<size> (msg/s; default 8 MB/s; the disk must hold
#          DURATION_S × rate × size: 15 GB and 22 GB at the defaults)
#          PRODUCERS=16 CONSUMERS=2 ROCKETMQ_HEAP=256m (the JVM heap, half the limit) SETTLE_S=60
#
# Petrel runs on its defaults: its page-cache budget is then a quarter of the cgroup's limit.
# Apache RocketMQ 5.5.0 runs with a heap of half the limit (its scripts' 8 GiB could not start).
# Not part of the suite (2 h at the defaults); CI runs the bench's unit tests and the page-cache
# test. The table goes to OUT/soak.md; the plots to OUT/<run>-soak.svg.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-bench-results/soak}")
duration=${DURATION_S:-1800}
limit=$(( ${LIMIT_MIB:-512} << 20 ))
sizes=${SIZES:-"1024 4096"}
brokers=${BROKERS:-"petrel rocketmq"}
export REF_NAMESRV_PORT=39876 REF_BROKER_PORT=39911
source scripts/reference-lib.sh
source scripts/lib/side-by-side.sh
[[ " $brokers " == *" rocketmq "* ]] && ref_fetch
mkdir -p "$out"
cg_root=/sys/fs/cgroup/memory
[ -f "$cg_root/memory.limit_in_bytes" ] || { echo "needs the cgroup v1 memory controller at $cg_root" >&2; exit 1; }

# new_cgroup NAME: an empty memory cgroup with the hard limit (and no swap to spill into).
new_cgroup() {
  local cg="$cg_root/$1"
  [ -d "$cg" ] && rmdir "$cg"
  mkdir "$cg"
  echo "$limit" >"$cg/memory.limit_in_bytes"
  [ -f "$cg/memory.memsw.limit_in_bytes" ] && echo "$limit" >"$cg/memory.memsw.limit_in_bytes"
  echo "$cg"
}

# soak LABEL NAMESRV PID CGROUP SIZE [bench flags…]
soak() {
  local label=$1 ns=$2 pid=$3 cg=$4 size=$5
  shift 5
  local rate_var="RATE_$size" rate=$((8192000 / size)) # 8 MB/s unless given
  [ "$size" = 1024 ] && rate=8000
  [ "$size" = 4096 ] && rate=3000
  "$petrel" bench soak -n "$ns" -t "Soak$size" --queues 4 \
    -p "${PRODUCERS:-16}" -c "${CONSUMERS:-2}" -s "$size" -r "${!rate_var:-$rate}" \
    -d "$duration" --settle-s "${SETTLE_S:-60}" --cgroup "$cg" --broker-pid "$pid" --no-progress -o "$out" -l "$label" "$@" \
    | tee "$out/$label.out"
  grep "^| $label " "$out/$label-soak.md" >"$out/$label.row"
  { dmesg 2>/dev/null | grep -i "killed process" | tail -3 || true; } >"$out/$label.oom"
}

for size in $sizes; do
  if [[ " $brokers " == *" petrel "* ]]; then
    cg=$(new_cgroup petrel-soak)
    rm -rf "$work/petrel"
    (
      echo "$BASHPID" >"$cg/cgroup.procs"
      exec "$petrel" serve --store-dir "$work/petrel" --namesrv-listen 127.0.0.1:39877 \
        --listen-port 39921 --broker-ip 127.0.0.1 --set flushDiskType=ASYNC_FLUSH
    ) >"$work/petrel.log" 2>&1 &
    petrel_pid=$!
    for _ in $(seq 1 100); do grep -q "boot success" "$work/petrel.log" && break; sleep 0.1; done
    soak "petrel-$size" 127.0.0.1:39877 "$petrel_pid" "$cg" "$size" --budget-bytes $((limit / 4))
    kill "$petrel_pid" 2>/dev/null || true
    wait "$petrel_pid" 2>/dev/null || true
    petrel_pid=""
    rm -rf "$work/petrel"
    rmdir "$cg"
  fi
  if [[ " $brokers " == *" rocketmq "* ]]; then
    cg=$(new_cgroup rocketmq-soak)
    REF_CGROUP=$cg REF_BROKER_HEAP=${ROCKETMQ_HEAP:-256m} scripts/reference-rocketmq.sh start ASYNC_FLUSH >/dev/null
    soak "rocketmq-$size" "127.0.0.1:$REF_NAMESRV_PORT" "$(tail -1 "$REF_STATE_DIR/pids")" "$cg" "$size"
    scripts/reference-rocketmq.sh stop >/dev/null
    rmdir "$cg"
  fi
done

{
  echo "Memory cgroup limit $((limit >> 20)) MiB (no swap), ASYNC_FLUSH, ${PRODUCERS:-16} synchronous senders at a fixed rate,"
  echo "${CONSUMERS:-2} consumers, ${duration} s per run; rates after the first ${SETTLE_S:-60} s."
  echo
  grep -h "^| run " "$out"/*-soak.md | head -1
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
  cat "$out"/*.row
} | tee "$out/soak.md"
