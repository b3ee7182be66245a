#!/usr/bin/env bash
# The page-cache budget, measured: `petrel serve` (ASYNC_FLUSH) in a fresh memory cgroup, once
# with `pageCacheBudgetBytes=$BUDGET` and once without, driven by `petrel bench produce` (16
# synchronous producers, 1 KiB). Samples the broker's RSS and its cgroup's memory usage (anon +
# page cache, cgroup v1) every second and prints the maximum of each beside the TPS.
# Usage: [BUDGET=268435456] [DURATION=60] scripts/bench-page-cache.sh   (as root, cgroup v1)
set -euo pipefail
BIN=${BIN:-target/release/petrel}
BUDGET=${BUDGET:-268435456}
SECONDS_RUN=${DURATION:-60}
CG=/sys/fs/cgroup/memory/petrel-pc
[ -x "$BIN" ] || cargo build --release -p petrel
run() { # label extra-settings...
  local label=$1; shift
  local dir; dir=$(mktemp -d /tmp/pc-XXXX)
  rmdir "$CG" 2>/dev/null || true; mkdir -p "$CG"
  "$BIN" serve --store-dir "$dir/data" --namesrv-listen 127.0.0.1:39876 --listen-port 39911 \
    --broker-ip 127.0.0.1 --set flushDiskType=ASYNC_FLUSH "$@" > "$dir/serve.log" 2>&1 &
  local pid=$!
  echo "$pid" > "$CG/cgroup.procs"
  for _ in $(seq 1 100); do grep -q "boot success" "$dir/serve.log" && break; sleep 0.1; done
  local peak_rss=0 peak_cg=0
  ( while kill -0 "$pid" 2>/dev/null; do
      rss=$(awk '/VmRSS/{print $2*1024}' "/proc/$pid/status" 2>/dev/null || echo 0)
      cg=$(cat "$CG/memory.usage_in_bytes")
      echo "$rss $cg"; sleep 1
    done ) > "$dir/samples" &
  local sampler=$!
  "$BIN" bench produce -n 127.0.0.1:39876 -p 16 -s 1024 --warmup 2 -d "$SECONDS_RUN" --no-progress \
    --broker-pid "$pid" -o "$dir/report" -l "$label" > "$dir/bench.out" 2>&1 || true
  kill "$pid"; wait "$pid" 2>/dev/null || true; kill "$sampler" 2>/dev/null || true
  peak_rss=$(awk 'BEGIN{m=0}{if($1>m)m=$1}END{print m}' "$dir/samples")
  peak_cg=$(awk 'BEGIN{m=0}{if($2>m)m=$2}END{print m}' "$dir/samples")
  tps=$(grep -o '"tps": *[0-9.]*' "$dir/report/"*.json | head -1 | grep -o '[0-9.]*$' || echo "?")
  printf "| %s | %.0f | %d MiB | %d MiB |\n" "$label" "$tps" $((peak_rss >> 20)) $((peak_cg >> 20))
  rm -rf "$dir"
}
echo "| run | send msg/s | broker RSS, max | cgroup memory (anon + page cache), max |"
echo "|---|---|---|---|"
run "budget $((BUDGET >> 20)) MiB" --set "pageCacheBudgetBytes=$BUDGET"
run "no budget" --set "pageCacheBudgetBytes=$((1 << 40))"
rmdir "$CG" 2>/dev/null || true
