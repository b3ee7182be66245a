#!/usr/bin/env bash
# Where `petrel serve`'s CPU goes, thread by thread, under `petrel bench produce` (16 synchronous
# producers, 1 KiB, ASYNC_FLUSH, no consumer): for each run, the send rate, the broker's minor and
# major page faults, and the CPU ticks of each thread name (from /proc/PID/task) at the end.
# The default page-cache budget study in docs/benchmarks.md used it.
#   scripts/bench-threads.sh LABEL[:key=value,...] ...   e.g.
#   scripts/bench-threads.sh default budget-256MiB:pageCacheBudgetBytes=268435456 default-2
#   env: DURATION=40 BIN=target/release/petrel
# Not part of the suite.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/petrel}
[ -x "$BIN" ] || cargo build --quiet --release --bin petrel
run() { # LABEL[:settings]
  local label=${1%%:*} settings=() dir pid
  [[ "$1" == *:* ]] && IFS=, read -ra pairs <<<"${1#*:}" && for kv in "${pairs[@]}"; do settings+=(--set "$kv"); done
  dir=$(mktemp -d /tmp/thr-XXXX)
  "$BIN" serve --store-dir "$dir/data" --namesrv-listen 127.0.0.1:39876 --listen-port 39911 \
    --broker-ip 127.0.0.1 --set flushDiskType=ASYNC_FLUSH "${settings[@]}" >"$dir/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do grep -q "boot success" "$dir/serve.log" && break; sleep 0.1; done
  "$BIN" bench produce -n 127.0.0.1:39876 -p 16 -s 1024 --warmup 2 -d "${DURATION:-40}" --no-progress \
    --broker-pid "$pid" -o "$dir/report" -l "$label" >"$dir/bench.out" 2>&1 || true
  echo "== $label: $(grep -o '"tps": *[0-9.]*' "$dir/report/"*.json | head -1)" \
    "minflt=$(awk '{sub(/.*\) /, ""); print $8}' "/proc/$pid/stat")" \
    "majflt=$(awk '{sub(/.*\) /, ""); print $10}' "/proc/$pid/stat")"
  for t in /proc/"$pid"/task/*; do
    echo "$(cat "$t/comm") $(awk '{sub(/.*\) /, ""); print $12 + $13}' "$t/stat")"
  done | awk '{a[$1] += $2} END {for (k in a) print a[k], k}' | sort -rn | head -12
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
}
for spec in "$@"; do run "$spec"; done
