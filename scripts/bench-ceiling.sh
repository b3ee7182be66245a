#!/usr/bin/env bash
# The load generator's own ceiling: 128 B sends as fast as possible against one `petrel serve`
# (ASYNC_FLUSH), `petrel bench` (oneway; async with 256 in flight; sync with 64 producers) beside
# RocketMQ's own Java benchmark Producer (org.apache.rocketmq.example.benchmark.Producer, sync, 64
# threads: its async mode only counted failures here), alternating, ROUNDS rounds each; prints
# the medians. The Java tool's "Send TPS" is its average since start: the last report is used.
#   scripts/bench-ceiling.sh        (env: ROUNDS=3 SECONDS_PER_RUN=10)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3}
secs=${SECONDS_PER_RUN:-10}
cargo build --quiet --release --bin petrel
mvn -q -B -f tests/clients/java/pom.xml package -DskipTests
work=$(mktemp -d)
ns=127.0.0.1:39886
target/release/petrel serve --store-dir "$work/data" --namesrv-listen "$ns" --listen-port 39931 --broker-ip 127.0.0.1 >"$work/petrel.log" 2>&1 &
petrel_pid=$!
java_pid=""
trap 'kill $petrel_pid 2>/dev/null; [ -n "$java_pid" ] && kill -9 $java_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do grep -q "boot success" "$work/petrel.log" && break; sleep 0.1; done
tps() { python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['tps']))" "$1"; }
median() { python3 -c "import sys,statistics; print(round(statistics.median(float(x) for x in sys.argv[1:])))" "$@"; }
oneway=() async=() sync=() java=()
for round in $(seq 1 "$rounds"); do
  target/release/petrel bench produce -n "$ns" --topic Ceiling --queues 8 --producers 4 --size 128 --mode oneway \
    --warmup 2 --duration "$secs" --no-progress --label "oneway-$round" --out "$work/out" >/dev/null
  oneway+=("$(tps "$work/out/oneway-$round.json")")
  target/release/petrel bench produce -n "$ns" --topic Ceiling --queues 8 --producers 4 --size 128 --mode async \
    --in-flight 256 --warmup 2 --duration "$secs" --no-progress --label "async-$round" --out "$work/out" >/dev/null
  async+=("$(tps "$work/out/async-$round.json")")
  target/release/petrel bench produce -n "$ns" --topic Ceiling --queues 8 --producers 64 --size 128 --mode sync \
    --warmup 2 --duration "$secs" --no-progress --label "sync-$round" --out "$work/out" >/dev/null
  sync+=("$(tps "$work/out/sync-$round.json")")
  java -Xmx512m -Drocketmq.namesrv.addr="$ns" -cp "tests/clients/java/target/lib/*" \
    org.apache.rocketmq.example.benchmark.Producer -n "$ns" -t Ceiling -w 64 -s 128 -ri 2000 \
    >"$work/java-$round.log" 2>&1 &
  java_pid=$!
  sleep $((secs + 12))
  kill "$java_pid"; wait "$java_pid" 2>/dev/null || true; java_pid=""
  java+=("$(grep -o 'Send TPS: *[0-9.]*' "$work/java-$round.log" | tail -1 | awk '{print $3}')")
  echo "round $round: petrel bench oneway ${oneway[-1]}, async ${async[-1]}, sync ${sync[-1]}; Java benchmark Producer ${java[-1]} msg/s" >&2
done
echo "| tool (128 B, against petrel serve, ASYNC_FLUSH) | msg/s, median of $rounds |"
echo "|---|---|"
echo "| petrel bench produce --mode oneway --producers 4 | $(median "${oneway[@]}") |"
echo "| petrel bench produce --mode async --in-flight 256 --producers 4 | $(median "${async[@]}") |"
echo "| petrel bench produce --mode sync --producers 64 | $(median "${sync[@]}") |"
echo "| RocketMQ benchmark Producer -w 64 (sync, 64 threads) | $(median "${java[@]}") |"
