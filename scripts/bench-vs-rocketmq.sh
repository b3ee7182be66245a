#!/usr/bin/env bash
# Apache RocketMQ 5.5.0 against Petrel, alternating A B A B …: 128 B and 1 KiB messages,
# ASYNC_FLUSH and SYNC_FLUSH, 1 and 16 producers (sync sends), medians of ROUNDS rounds each.
# Prints one Markdown table per flush mode; the per-cell reports land in OUT.
#   scripts/bench-vs-rocketmq.sh [OUT]    (env: ROUNDS=3 DURATION=5 WARMUP=2)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-results/vs-rocketmq}
rounds=${ROUNDS:-3}
duration=${DURATION:-5}
warmup=${WARMUP:-2}
export REF_NAMESRV_PORT=39876 REF_BROKER_PORT=39911
source scripts/lib/side-by-side.sh
mkdir -p "$out"

for flush in ASYNC_FLUSH SYNC_FLUSH; do
  scripts/reference-rocketmq.sh start "$flush" >/dev/null
  ref_pid=$(tail -1 "$REF_STATE_DIR/pids")
  start_petrel 39877 39921 --set "flushDiskType=$flush"
  echo
  echo "#### $flush (sync sends; medians of $rounds rounds, ${duration} s each after ${warmup} s warm-up)"
  echo
  echo "| size | producers | RocketMQ msg/s | Petrel msg/s | ratio | RocketMQ P99 | Petrel P99 | RocketMQ P99.99 | Petrel P99.99 | RocketMQ CPU | Petrel CPU | RocketMQ RSS | Petrel RSS |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for size in 128 1024; do
    for producers in 1 16; do
      cell="$out/$flush-${size}B-${producers}p"
      target/release/petrel bench compare --a "127.0.0.1:$REF_NAMESRV_PORT" --b 127.0.0.1:39877 \
        --label-a rocketmq --label-b petrel --pid-a "$ref_pid" --pid-b "$petrel_pid" --rounds "$rounds" \
        --topic "VsBench${size}x${producers}" --queues 8 --size "$size" --producers "$producers" \
        --warmup "$warmup" --duration "$duration" --no-progress --out "$cell" >"$cell.txt" 2>&1
      c="$cell/compare-rocketmq-vs-petrel.json"
      json "$c" "'| %d B | %d | %.0f | %.0f | %.2f× | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.0f%% | %.0f%% | %.0f MB | %.0f MB |' % ($size, $producers, d['a']['tps'], d['b']['tps'], d['b']['tps'] / max(d['a']['tps'], 1e-9), d['a']['p99_us'] / 1e3, d['b']['p99_us'] / 1e3, d['a']['p9999_us'] / 1e3, d['b']['p9999_us'] / 1e3, d['a']['broker_cpu_pct'] or 0, d['b']['broker_cpu_pct'] or 0, d['a']['broker_rss_mb'] or 0, d['b']['broker_rss_mb'] or 0)"
    done
  done
  kill "$petrel_pid"
  wait "$petrel_pid" || true
  petrel_pid=""
  scripts/reference-rocketmq.sh stop >/dev/null
done
