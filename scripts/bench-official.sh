#!/usr/bin/env bash
# The headline: Apache RocketMQ's own benchmark Producer and Consumer (rocketmq-example 5.5.0,
# unmodified) against `petrel serve` and against Apache RocketMQ 5.5.0, one broker after the
# other on this machine: 16 synchronous send threads, 20 consumer threads, 1 KiB bodies, a
# topic of 4 queues, $SECONDS_PER_RUN s per run with the first $DROP_S s dropped (RocketMQ's JIT
# needs about 60 s), ASYNC_FLUSH and SYNC_FLUSH. Recorded: send TPS, average RT, the tool's max
# RT, consume TPS, broker CPU per message (from /proc, over the kept window), max RSS and, as
# root with the cgroup v1 memory controller, the peak memory (anon + page cache) of a cgroup
# without a limit that holds only the broker. Beside them, in the same run, the disk's own
# group-commit limit for 16 writers of 1 KiB (crates/store/examples/group_commit.rs).
#
#   scripts/bench-official.sh [OUT]
#     env: SECONDS_PER_RUN=150 DROP_S=60 MODES="ASYNC_FLUSH SYNC_FLUSH" BROKERS="petrel rocketmq"
#          PETREL_BIN=target/release/petrel (another build of petrel, to compare builds)
#          PETREL_RUNS="petrel": one Petrel run per word, LABEL or LABEL:key=value,key=value
#            (broker.conf settings), e.g. the page-cache budget study:
#            PETREL_RUNS="petrel-budget:pageCacheBudgetBytes=268435456 petrel-no-budget:pageCacheBudgetBytes=1099511627776"
#          TOOL_ARGS="-a true -ak USER -sk SECRET": extra arguments of the benchmark Producer and
#            Consumer, e.g. to sign every request with AclClientRPCHook (the access-control study in
#            docs/benchmarks.md; mqadmin then signs from ROCKETMQ_HOME/conf/tools.yml)
#
# Not part of the suite: about 12 minutes. Prints a Markdown table; logs and samples land in OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-results/official}
secs=${SECONDS_PER_RUN:-150}
drop=${DROP_S:-60}
modes=${MODES:-"ASYNC_FLUSH SYNC_FLUSH"}
brokers=${BROKERS:-"petrel rocketmq"}
export REF_NAMESRV_PORT=39876 REF_BROKER_PORT=39911
source scripts/reference-lib.sh
source scripts/lib/side-by-side.sh
ref_fetch
cargo build --quiet --release -p petrel-store --example group_commit
mvn -q -B -f tests/clients/java/pom.xml package -DskipTests # rocketmq-example 5.5.0 and its client
mkdir -p "$out"
lib="tests/clients/java/target/lib/*"
cg=""
if [ -w /sys/fs/cgroup/memory ] && [ -f /sys/fs/cgroup/memory/memory.usage_in_bytes ]; then
  cg=/sys/fs/cgroup/memory/bench-official
fi

# fresh_cgroup: an empty cgroup without a limit for the next broker (its peak starts at zero).
fresh_cgroup() {
  [ -z "$cg" ] && return 0
  [ -d "$cg" ] && rmdir "$cg"
  mkdir "$cg"
}

# sample PID FILE SECONDS: one line a second — time, CPU ticks (utime+stime), VmRSS kB, RssAnon kB.
sample() {
  local pid=$1 file=$2 n=$3
  for _ in $(seq 1 "$n"); do
    [ -r "/proc/$pid/stat" ] || break
    local ticks rss anon
    ticks=$(awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$pid/stat")
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
    anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status")
    echo "$(date +%s.%N) $ticks $rss $anon" >>"$file"
    sleep 1
  done
}

# run LABEL FLUSH NAMESRV BROKER_PID: the tools against one broker.
run() {
  local label=$1 flush=$2 ns=$3 pid=$4 cell="$out/$1-$2"
  rm -f "$cell".*
  ref_mqadmin "$ns" updateTopic -c DefaultCluster -t BenchOfficial -r 4 -w 4 >"$cell.topic.log"
  # shellcheck disable=SC2086 # TOOL_ARGS is a list of words
  java -Xms1g -Xmx1g -cp "$lib" org.apache.rocketmq.example.benchmark.Consumer -n "$ns" -t BenchOfficial -w 20 \
    -g "bench_consumer_$label" ${TOOL_ARGS:-} >"$cell.consumer.log" 2>&1 &
  local consumer=$!
  sleep 3
  # shellcheck disable=SC2086
  java -Xms1g -Xmx1g -cp "$lib" org.apache.rocketmq.example.benchmark.Producer -n "$ns" -t BenchOfficial -w 16 -s 1024 \
    ${TOOL_ARGS:-} >"$cell.producer.log" 2>&1 &
  local producer=$!
  sample "$pid" "$cell.samples" "$secs"
  kill "$producer" "$consumer" 2>/dev/null || true
  wait "$producer" "$consumer" 2>/dev/null || true
  local peak=0
  [ -n "$cg" ] && peak=$(cat "$cg/memory.max_usage_in_bytes")
  python3 - "$cell" "$label" "$flush" "$drop" "$peak" <<'PY'
import re, sys
cell, label, flush, drop, peak = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
# The tools print a line every 10 s covering the 10 s before it; keep those after the drop
# (the producer starts 3 s after the sampling origin's consumer, so its clock is close enough).
def lines(path, key):
    return [l for l in open(path, errors="replace") if key in l]
send = lines(cell + ".producer.log", "Send TPS:")[int(drop // 10):]
cons = lines(cell + ".consumer.log", "Consume TPS:")[int(drop // 10):]
num = lambda pat, l: float(re.search(pat, l).group(1))
tps = [num(r"Send TPS: (\d+)", l) for l in send]
rt = [num(r"Average RT\(ms\):\s*([\d.]+)", l) for l in send]
max_rt = num(r"Max RT\(ms\): (\d+)", send[-1]) if send else 0
failed = num(r"Send Failed: (\d+)", send[-1]) if send else 0
ctps = [num(r"Consume TPS: (\d+)", l) for l in cons]
samples = [list(map(float, l.split())) for l in open(cell + ".samples")]
origin = samples[0][0]
samples = [[s[0] - origin] + s[1:] for s in samples]
kept = [s for s in samples if s[0] >= drop]
hz = 100.0
cpu_s = (kept[-1][1] - kept[0][1]) / hz if len(kept) > 1 else 0
window = kept[-1][0] - kept[0][0] if len(kept) > 1 else 1
mean_tps = sum(tps) / len(tps) if tps else 0
mean_rt = sum(t * r for t, r in zip(tps, rt)) / sum(tps) if sum(tps) else 0
cpu_per_msg_us = cpu_s / (mean_tps * window) * 1e6 if mean_tps else 0
rss = max(s[2] for s in samples) / 1024
anon = max(s[3] for s in samples) / 1024
row = (f"| {label} | {flush} | {mean_tps:,.0f} | {mean_rt:.2f} ms | {max_rt:.0f} ms | {failed:.0f} | "
       f"{(sum(ctps) / len(ctps) if ctps else 0):,.0f} | {cpu_s / window * 100:.0f}% | {cpu_per_msg_us:.1f} µs | {rss:,.0f} MB | {anon:,.0f} MB | "
       + (f"{peak / 2**20:,.0f} MiB |" if peak else "– |"))
open(cell + ".row", "w").write(row + "\n")
print(row)
PY
}

for flush in $modes; do
  if [[ " $brokers " == *" petrel "* ]]; then
    for variant in ${PETREL_RUNS:-petrel}; do
      settings=()
      [[ "$variant" == *:* ]] && IFS=, read -ra pairs <<<"${variant#*:}" && for kv in "${pairs[@]}"; do settings+=(--set "$kv"); done
      fresh_cgroup
      PETREL_CGROUP=$cg start_petrel 39877 39921 --set "flushDiskType=$flush" "${settings[@]}"
      run "${variant%%:*}" "$flush" 127.0.0.1:39877 "$petrel_pid"
      kill "$petrel_pid"
      wait "$petrel_pid" || true
      petrel_pid=""
    done
  fi
  if [[ " $brokers " == *" rocketmq "* ]]; then
    fresh_cgroup
    REF_CGROUP=$cg scripts/reference-rocketmq.sh start "$flush" >/dev/null
    run rocketmq "$flush" "127.0.0.1:$REF_NAMESRV_PORT" "$(tail -1 "$REF_STATE_DIR/pids")"
    scripts/reference-rocketmq.sh stop >/dev/null
  fi
done

echo
echo "RocketMQ's benchmark Producer (16 sync threads, 1 KiB) and Consumer (20 threads), topic of 4 queues,"
echo "${secs} s per run, the first ${drop} s dropped; broker CPU and RSS from /proc over the kept window;"
echo "the broker's cgroup peak (memory.max_usage_in_bytes: anon + page cache) over the whole run."
echo
echo "| broker | flush | send msg/s | avg RT | max RT (whole run) | send failed | consume msg/s | broker CPU | CPU per message | max RSS | max anon RSS | cgroup peak |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
cat "$out"/*.row
echo
echo "The disk's group-commit limit on the same disk (16 writers, 1 KiB, one fdatasync per batch), beside Petrel's commit log alone,"
echo "on fresh files and on zero-filled ones (the steady state under SYNC_FLUSH):"
echo
[ -n "$cg" ] && rmdir "$cg"
target/release/examples/group_commit "$work/group-commit" 20 16 1024
