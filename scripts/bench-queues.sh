#!/usr/bin/env bash
# Many queues on one broker, side by side: `petrel bench queues` (light message queues: a fill
# that files one message in each queue, then sends to a random active subset of 10k with
# consumers pulling them, the broker's RSS, mappings and fds, kill -9 with every acknowledged
# message checked, and a clean restart) against `petrel serve`, then against Apache RocketMQ
# 5.5.0 with its file consume queue and with `storeType=defaultRocksDB`, each as far as it gets.
#
#   scripts/bench-queues.sh [OUT]
#     env: COUNTS=4,1000,10000,100000  DURATION=20  BROKERS="petrel rocketmq-file rocketmq-rocksdb"
#          ARGS="…" (more `petrel bench queues` flags, e.g. --producers 8)
#
# Not part of the suite (the suite runs a small count in scripts/interop-bench.sh): minutes per
# count and broker. Prints one Markdown table per broker; reports land in OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-results/queues}
counts=${COUNTS:-4,1000,10000,100000}
duration=${DURATION:-20}
brokers=${BROKERS:-"petrel rocketmq-file rocketmq-rocksdb"}
export REF_NAMESRV_PORT=43876 REF_BROKER_PORT=43911
source scripts/reference-lib.sh
cargo build --quiet --release --bin petrel
mkdir -p "$out"
work=$(mktemp -d)
ns_pid=""
trap '[ -n "$ns_pid" ] && kill "$ns_pid" 2>/dev/null; rm -rf "$work"' EXIT
bench() { target/release/petrel bench queues --counts "$counts" --duration "$duration" --out "$out" --data "$work/data" ${ARGS:-} "$@"; }

# rocketmq_cmd STORE_TYPE: the broker command `petrel bench queues` runs for each count: a
# broker.conf for the count's data directory, then the JVM (exec'd, so kill -9 reaches it).
rocketmq_cmd() {
  local store_type=$1
  REF_BROKER_CONF_EXTRA="enableLmq=true
enableMultiDispatch=true
maxLmqConsumeQueueNum=@MAX@
storeType=$store_type" \
    ref_broker_conf @DATA@ "127.0.0.1:$REF_NAMESRV_PORT" "$REF_BROKER_PORT" ASYNC_FLUSH >"$work/broker-$store_type.conf"
  echo "sed -e 's#@DATA@#{data}#g' -e 's#@MAX@#{max_queues}#' $work/broker-$store_type.conf >{data}/broker.conf &&" \
    "ROCKETMQ_HOME=$work/home exec java -Xms1g -Xmx1g -cp '$ref_lib/*' org.apache.rocketmq.broker.BrokerStartup -c {data}/broker.conf"
}

for b in $brokers; do
  case $b in
    petrel)
      bench --label petrel
      ;;
    rocketmq-file | rocketmq-rocksdb)
      ref_fetch
      [ -z "$ns_pid" ] && ns_pid=$(ref_namesrv "$work/namesrv" "$REF_NAMESRV_PORT")
      store_type=default
      [ "$b" = rocketmq-rocksdb ] && store_type=defaultRocksDB
      mkdir -p "$work/home/conf"
      bench --label "$b" --namesrv "127.0.0.1:$REF_NAMESRV_PORT" --broker "127.0.0.1:$REF_BROKER_PORT" \
        --broker-cmd "$(rocketmq_cmd $store_type)" || echo "$b: see the table for where it stopped"
      ;;
  esac
done
