#!/usr/bin/env bash
# The seed's replication experiment (docs/benchmarks.md, "Replication"): `petrel bench replication`
# with SYNC_MASTER (a send waits for every slave in sync) and with ASYNC_MASTER, 0 to 4 slaves on
# this machine, cells of senders x receivers, MESSAGES messages per cell, the whole run's time
# (first sent to last received); then Apache RocketMQ 5.5.0 with 0 and 1 slave (SYNC_MASTER,
# inSyncReplicas=2) on the 1x1 and 10x10 cells, measured by the same client.
#
#   scripts/bench-replication.sh [OUT]
#     env: MESSAGES=100000 CELLS=1x1,10x10,100x100 REPLICAS=0,1,2,3,4 ROLES="SYNC_MASTER ASYNC_MASTER"
#          SIZE=128 (body bytes) REF_CELLS=1x1,10x10 (empty: no RocketMQ runs)
#
# Each row also has the master's CPU per message and its slaves' together (from /proc), RocketMQ's
# too: what replication costs in CPU is the master's increase over the 0-slave row plus the slaves'.
#
# Not part of the suite (tens of minutes at the defaults). Tables, JSON and SVGs land in OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-results/replication}
msgs=${MESSAGES:-100000}
ref_cells=${REF_CELLS-1x1,10x10}
source scripts/reference-lib.sh
cargo build --quiet --release --bin petrel
mkdir -p "$out"
for role in ${ROLES:-SYNC_MASTER ASYNC_MASTER}; do
  target/release/petrel bench replication --role "$role" --messages "$msgs" --size "${SIZE:-128}" \
    --cells "${CELLS:-1x1,10x10,100x100}" --replicas "${REPLICAS:-0,1,2,3,4}" --out "$out" --data "$out/data"
done
[ -z "$ref_cells" ] && exit 0

ref_fetch
work=$(mktemp -d)
pids=()
stop_all() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[$i]}" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 1 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$p" 2>/dev/null || true
  done
  pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT
ns=127.0.0.1:47876
for slaves in 0 1; do
  pids+=("$(ref_namesrv "$work/ns$slaves" 47876)")
  master_conf="brokerRole=SYNC_MASTER"
  [ "$slaves" = 1 ] && master_conf=$'brokerRole=SYNC_MASTER\ninSyncReplicas=2'
  master_pid=$(REF_BROKER_CONF_EXTRA="$master_conf" ref_broker "$work/master$slaves" "$ns" 47911 ASYNC_FLUSH)
  pids+=("$master_pid")
  measured=$master_pid
  if [ "$slaves" = 1 ]; then
    slave_pid=$(REF_BROKER_CONF_EXTRA=$'brokerId=1\nbrokerRole=SLAVE' ref_broker "$work/slave" "$ns" 47921 ASYNC_FLUSH)
    pids+=("$slave_pid")
    measured="$master_pid,$slave_pid"
  fi
  target/release/petrel bench replication --external "$ns" --label "rocketmq-$slaves-slaves" --role SYNC_MASTER \
    --replicas "$slaves" --cells "$ref_cells" --messages "$msgs" --size "${SIZE:-128}" --pids "$measured" --out "$out"
  stop_all
done
