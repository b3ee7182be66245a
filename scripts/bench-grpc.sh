#!/usr/bin/env bash
# RocketMQ 5's gRPC protocol side by side: the official Java SDK (rocketmq-client-java 5.2.0,
# tests/clients/grpc-java, scenarios bench-produce and bench-consume) against three servers on
# this machine, one after the other, each started fresh for every flush mode:
#   petrel         `petrel serve` answering gRPC itself (grpcServerPort), name server inside;
#   proxy-local    Apache RocketMQ 5.5.0's proxy in local mode: proxy and broker in one JVM
#                  (ProxyStartup -pm local -bc broker.conf), beside a name server;
#   proxy-cluster  the proxy in cluster mode: a proxy JVM in front of a separate broker JVM and
#                  a name server.
# Per server and flush mode (SYNC_FLUSH, ASYNC_FLUSH): a topic of 8 queues (message.type=NORMAL),
# THREADS synchronous send threads sharing one Producer with 1 KiB bodies for DURATION s, the
# first WARMUP s not measured; the server's CPU (utime+stime from /proc, proxy and broker summed
# in cluster mode) over exactly the measured window; then CONSUME_THREADS SimpleConsumers
# receiving and acking the backlog for CONSUME_SECONDS s (CONSUME_WARMUP s not measured); then an
# open-loop run at half the send rate just measured, for HALF_SECONDS s after HALF_WARMUP s, for
# its P99.99. One Markdown row per server and flush mode, printed and written to OUT/bench-grpc.md.
#
#   scripts/bench-grpc.sh
#     env: OUT=/work/tmp/bench-grpc-out  DURATION=150 WARMUP=60 THREADS=32
#          CONSUME_SECONDS=60 CONSUME_WARMUP=10 CONSUME_THREADS=$THREADS
#          HALF_SECONDS=60 HALF_WARMUP=10
#          MODES="SYNC_FLUSH ASYNC_FLUSH" TARGETS="petrel proxy-local proxy-cluster"
#          PETREL_BIN=target/release/petrel (another build of petrel, to compare builds)
#          HALF_AT="petrel/SYNC_FLUSH=6026 proxy-local/SYNC_FLUSH=3552 …" (only the half-load run,
#          at these rates: the tail-latency column again, against an earlier run's send rates)
#          BROKER_HEAP=1g PROXY_HEAP=1g (cluster mode's two JVMs) LOCAL_HEAP=2g (local mode's one)
#
# Not part of the suite: with the defaults about 5 minutes per server and flush mode, 30 in all.
# Fetches rocketmq-proxy 5.5.0 (tests/reference/proxy/pom.xml) into tests/reference/proxy-lib.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/work/tmp/bench-grpc-out}
duration=${DURATION:-150}
warmup=${WARMUP:-60}
threads=${THREADS:-32}
consume_secs=${CONSUME_SECONDS:-60}
consume_warmup=${CONSUME_WARMUP:-10}
consume_threads=${CONSUME_THREADS:-$threads}
half_secs=${HALF_SECONDS:-60}
half_warmup=${HALF_WARMUP:-10}
modes=${MODES:-"SYNC_FLUSH ASYNC_FLUSH"}
targets=${TARGETS:-"petrel proxy-local proxy-cluster"}
petrel_bin=${PETREL_BIN:-target/release/petrel}
broker_heap=${BROKER_HEAP:-1g}
proxy_heap=${PROXY_HEAP:-1g}
local_heap=${LOCAL_HEAP:-2g}
topic=BenchGrpc
group=BenchGrpcGroup
body_bytes=1024
jar=tests/clients/grpc-java/target/grpc-java-test.jar

source scripts/reference-lib.sh

# ---------------------------------------------------------------- builds and jars

ref_fetch
# The proxy and its dependencies live in a directory of their own (tests/reference/proxy/pom.xml):
# on the suite's classpath its logging configuration would replace the brokers' and mqadmin's.
proxy_lib="$ref_root/tests/reference/proxy-lib"
if [ ! -f "$proxy_lib/rocketmq-proxy-5.5.0.jar" ]; then
  echo "fetching rocketmq-proxy 5.5.0 and its dependencies"
  mvn -q -B -f "$ref_root/tests/reference/proxy/pom.xml" dependency:copy-dependencies -DoutputDirectory="$proxy_lib"
fi
[ -n "${PETREL_BIN:-}" ] || cargo build --quiet --release --bin petrel
mvn -q -B -f tests/clients/grpc-java/pom.xml package -DskipTests

mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-grpc.XXXXXX")
hz=$(getconf CLK_TCK)

# The processes of the run in progress (servers, a background client), so an interrupted run
# leaves none behind. Only live ones are listed: a pid is dropped once its process is stopped.
all_pids=()
forget() { # PID
  local kept=() p
  for p in "${all_pids[@]}"; do [ "$p" = "$1" ] || kept+=("$p"); done
  all_pids=("${kept[@]}")
}
cleanup() {
  local pid
  for pid in "${all_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 1
  for pid in "${all_pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# ---------------------------------------------------------------- helpers

# free_ports N: N distinct ports the kernel hands out for port 0 on loopback, each with its
# neighbours at -2 and +1 free too, because a RocketMQ broker also opens listenPort - 2 (its fast
# channel) and listenPort + 1 (its HA port). All are held until all are chosen, so none repeats.
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
def bindable(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()
want, held, ports = int(sys.argv[1]), [], []
while len(ports) < want:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)
    p = s.getsockname()[1]
    if p > 1026 and all(abs(p - q) > 3 for q in ports) and bindable(p - 2) and bindable(p + 1):
        ports.append(p)
print(" ".join(map(str, ports)))
for s in held:
    s.close()
PY
}
free_port() { free_ports 1; }

# cpu_ticks PID...: CPU time used so far (utime + stime, in clock ticks) by these processes,
# summed. Fields 14 and 15 of /proc/PID/stat, counted after the command name, which may hold spaces.
cpu_ticks() {
  local pid total=0 t
  for pid in "$@"; do
    t=$(awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$pid/stat")
    total=$((total + t))
  done
  echo "$total"
}

# wait_for FILE TEXT PID SECONDS: waits until a line of FILE is exactly TEXT; fails if PID ends or
# the time runs out first.
wait_for() {
  local file=$1 text=$2 pid=$3 limit=$4 i
  for ((i = 0; i < limit * 20; i++)); do
    grep -qxF "$text" "$file" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# wait_log FILE TEXT PID WHAT: waits up to 120 s for TEXT anywhere in a server's log; on failure
# shows the log's end and stops the script.
wait_log() {
  local file=$1 text=$2 pid=$3 what=$4 i
  for ((i = 0; i < 1200; i++)); do
    grep -qF "$text" "$file" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  tail -20 "$file" >&2
  echo "$what did not start" >&2
  exit 1
}

# client LOG WARMUP SCENARIO ARGS...: one run of the SDK benchmark against $endpoint; stdout to
# LOG.out (tick and result lines), stderr to LOG.err. The exit status is the client's.
client() {
  local log=$1 warm=$2
  shift 2
  java -Xms1g -Xmx1g -Drocketmq.log.root="$work/sdk-logs" -Dpetrel.bench.warmupSeconds="$warm" \
    -jar "$jar" "$endpoint" "$@" >"$log.out" 2>"$log.err"
}

# result FILE KEY: a value from the client's `result` line ("" when there is none).
result() { sed -n "s/^result.* $2=\([^ ]*\).*/\1/p" "$1" | tail -1; }

# ticks_total FILE: everything the client counted, warm-up included (the sum of its tick lines).
ticks_total() { awk '$1 == "tick" {n += $3} END {printf "%d\n", n}' "$1"; }

# proxy_json FILE MODE [BROKER_CONF]: the proxy's configuration (ProxyConfig's keys): its gRPC and
# remoting ports, the name server, the RocketMQ cluster it serves, loopback as the address it
# gives out, and in local mode the broker.conf of the broker it runs inside itself.
proxy_json() {
  local file=$1 mode=$2 broker_conf=${3:-}
  {
    echo "{"
    echo "  \"proxyMode\": \"$mode\","
    echo "  \"rocketMQClusterName\": \"DefaultCluster\","
    echo "  \"namesrvAddr\": \"$ns\","
    echo "  \"grpcServerPort\": $grpc_port,"
    echo "  \"remotingListenPort\": $remoting_port,"
    echo "  \"localServeAddr\": \"127.0.0.1\","
    [ -n "$broker_conf" ] && echo "  \"brokerConfigPath\": \"$broker_conf\","
    # A stop should not wait out the default 30 s grace for open gRPC calls.
    echo "  \"grpcShutdownTimeSeconds\": 3"
    echo "}"
  } >"$file"
}

# jvm_logs DIR ROLE: JVM options that put a RocketMQ process's own logs (~/logs/rocketmqlogs)
# inside DIR and pick its role's logback configuration by name, as RocketMQ's start scripts do.
# Left to itself, a JVM whose class path holds every reference jar takes the first configuration
# it finds on it (the proxy's, once rocketmq-proxy is there), whatever its role.
jvm_logs() { echo "-Duser.home=$1/home -Drmq.logback.configurationFile=rmq.$2.logback.xml"; }

# start_proxy DIR HEAP ARGS...: the proxy JVM from the reference jars. ROCKETMQ_HOME must be set
# (the broker inside a local-mode proxy refuses to start without it). Sets proxy_pid and waits
# for its start-up line.
start_proxy() {
  local dir=$1 heap=$2
  shift 2
  mkdir -p "$dir/home/conf"
  local opts
  read -ra opts <<<"$(jvm_logs "$dir" proxy)"
  (
    ROCKETMQ_HOME="$dir/home" exec java "-Xms$heap" "-Xmx$heap" "${opts[@]}" -cp "$proxy_lib/*" \
      org.apache.rocketmq.proxy.ProxyStartup "$@"
  ) >"$dir/proxy.log" 2>&1 &
  proxy_pid=$!
  all_pids+=("$proxy_pid")
  # ProxyStartup prints this to stdout once every server in it (broker included) has started.
  wait_log "$dir/proxy.log" "rocketmq-proxy startup successfully" "$proxy_pid" "the RocketMQ proxy"
}

# ---------------------------------------------------------------- servers
# Each sets: ns (name server), broker_addr (for mqadmin), endpoint (gRPC), started (every pid, in
# start order) and measured (the pids whose CPU is the server's).

start_petrel() { # DIR FLUSH
  local dir=$1 flush=$2
  ns="127.0.0.1:$ns_port" broker_addr="127.0.0.1:$broker_port" endpoint="127.0.0.1:$grpc_port"
  # Loopback only; no fast channel (a RocketMQ client would not use it here either).
  "$petrel_bin" serve --store-dir "$dir/petrel" --namesrv-listen "$ns" --listen-port "$broker_port" \
    --broker-ip 127.0.0.1 --set bindAddress=127.0.0.1 --set fastListenPort=0 \
    --set "grpcServerPort=$grpc_port" --set "flushDiskType=$flush" >"$dir/petrel.log" 2>&1 &
  local pid=$!
  all_pids+=("$pid")
  started=("$pid") measured=("$pid")
  wait_log "$dir/petrel.log" "boot success" "$pid" "petrel serve"
  wait_log "$dir/petrel.log" "gRPC (RocketMQ 5 SDKs) listening" "$pid" "petrel's gRPC port"
}

start_proxy_local() { # DIR FLUSH
  local dir=$1 flush=$2
  ns="127.0.0.1:$ns_port" broker_addr="127.0.0.1:$broker_port" endpoint="127.0.0.1:$grpc_port"
  # Local mode still reads routes from a name server, where its broker registers.
  local ns_pid
  ns_pid=$(JAVA_TOOL_OPTIONS=$(jvm_logs "$dir" namesrv) ref_namesrv "$dir" "$ns_port")
  all_pids+=("$ns_pid")
  # The broker half: the same settings scripts/reference-lib.sh gives a stand-alone broker.
  mkdir -p "$dir/store"
  cat >"$dir/broker.conf" <<CONF
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
brokerIP1=127.0.0.1
bindAddress=127.0.0.1
listenPort=$broker_port
namesrvAddr=$ns
storePathRootDir=$dir/store
storePathCommitLog=$dir/store/commitlog
autoCreateTopicEnable=true
flushDiskType=$flush
CONF
  proxy_json "$dir/rmq-proxy.json" local "$dir/broker.conf"
  start_proxy "$dir" "$local_heap" -pc "$dir/rmq-proxy.json" -pm local -bc "$dir/broker.conf" -n "$ns"
  started=("$ns_pid" "$proxy_pid") measured=("$proxy_pid")
}

start_proxy_cluster() { # DIR FLUSH
  local dir=$1 flush=$2
  ns="127.0.0.1:$ns_port" broker_addr="127.0.0.1:$broker_port" endpoint="127.0.0.1:$grpc_port"
  local ns_pid broker_pid
  # scripts/reference-lib.sh starts these; the JVM options reach them through JAVA_TOOL_OPTIONS.
  ns_pid=$(JAVA_TOOL_OPTIONS=$(jvm_logs "$dir" namesrv) ref_namesrv "$dir" "$ns_port")
  all_pids+=("$ns_pid")
  broker_pid=$(JAVA_TOOL_OPTIONS=$(jvm_logs "$dir" broker) REF_BROKER_HEAP=$broker_heap \
    REF_BROKER_CONF_EXTRA="bindAddress=127.0.0.1" ref_broker "$dir" "$ns" "$broker_port" "$flush")
  all_pids+=("$broker_pid")
  # The proxy finds the broker through the name server, by the cluster name the broker registers.
  proxy_json "$dir/rmq-proxy.json" cluster
  start_proxy "$dir/proxy" "$proxy_heap" -pc "$dir/rmq-proxy.json" -pm cluster -n "$ns"
  started=("$ns_pid" "$broker_pid" "$proxy_pid") measured=("$broker_pid" "$proxy_pid")
}

# stop_started: the newest process first (the proxy before its broker, the broker before the
# name server it unregisters from), each given 30 s before it is killed.
stop_started() {
  local i pid n
  for ((i = ${#started[@]} - 1; i >= 0; i--)); do
    pid=${started[$i]}
    kill "$pid" 2>/dev/null || true
    for ((n = 0; n < 150; n++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    forget "$pid"
  done
}

# ---------------------------------------------------------------- one server, one flush mode

run_cell() { # TARGET FLUSH
  local target=$1 flush=$2
  local cell="$out/$target-$flush" dir="$work/$target-$flush"
  rm -f "$cell".*
  mkdir -p "$dir"
  read -r ns_port broker_port grpc_port remoting_port <<<"$(free_ports 4)"
  echo "== $target, $flush (name server $ns_port, broker $broker_port, gRPC $grpc_port)" >&2
  case $target in
    petrel) start_petrel "$dir" "$flush" ;;
    proxy-local) start_proxy_local "$dir" "$flush" ;;
    proxy-cluster) start_proxy_cluster "$dir" "$flush" ;;
    *) echo "unknown target $target" >&2; exit 2 ;;
  esac

  # The topic and the group, made by the broker's own admin tool, as an operator would; then wait
  # until the name server gives out the topic's route, since every server here reads routes there.
  ref_mqadmin "$ns" updateTopic -b "$broker_addr" -t "$topic" -r 8 -w 8 -a +message.type=NORMAL >"$cell.admin.log"
  ref_mqadmin "$ns" updateSubGroup -b "$broker_addr" -g "$group" >>"$cell.admin.log"
  local i
  for ((i = 0; i < 60; i++)); do
    ref_mqadmin "$ns" topicRoute -t "$topic" 2>/dev/null | grep -Eq '"writeQueueNums" ?: ?8' && break
    sleep 0.5
  done

  # Prime the group on the empty topic. A gRPC receive of a group with no offset yet starts where
  # the server decides: Petrel at a queue's first message, RocketMQ (initMode MAX) at its first
  # message only while that is still in memory, else at its end, which after minutes of writing
  # would leave the consumer run nothing. A first receive on empty queues fixes every queue's
  # offset at 0 on all three, so the consumer run below reads the whole backlog on each.
  client "$cell.prime" 0 bench-consume "$topic" "$group" 5 "$consume_threads" || true

  # HALF_AT names a rate for this cell ("target/FLUSH=RATE"): then only the half-load run below,
  # at that rate (a rerun of the tail-latency column against an earlier run's send rates).
  local fixed_half="" kv
  for kv in ${HALF_AT:-}; do
    if [ "${kv%%=*}" = "$target/$flush" ]; then fixed_half=${kv#*=}; fi
  done
  local tps="" sends="" p50="" p99="" p9999="" errors="" ctps="" drained="" cpu0="" cpu1="" t0="" t1=""
  if [ -z "$fixed_half" ]; then
  # Sends at full speed. The client marks the measured window's edges on stdout; the server's CPU
  # is read at each edge, so CPU per message covers the same sends as TPS and the percentiles.
  java -Xms1g -Xmx1g -Drocketmq.log.root="$work/sdk-logs" -Dpetrel.bench.warmupSeconds="$warmup" \
    -jar "$jar" "$endpoint" bench-produce "$topic" "$threads" "$duration" "$body_bytes" \
    >"$cell.produce.out" 2>"$cell.produce.err" &
  local bench=$!
  all_pids+=("$bench")
  if wait_for "$cell.produce.out" "window start" "$bench" $((duration + 120)); then
    cpu0=$(cpu_ticks "${measured[@]}") t0=$(date +%s.%N)
    if wait_for "$cell.produce.out" "window end" "$bench" $((duration + 60)); then
      cpu1=$(cpu_ticks "${measured[@]}") t1=$(date +%s.%N)
    fi
  fi
  wait "$bench" || true
  forget "$bench"
  tps=$(result "$cell.produce.out" tps)
  sends=$(result "$cell.produce.out" sends)
  p50=$(result "$cell.produce.out" p50_us)
  p99=$(result "$cell.produce.out" p99_us)
  p9999=$(result "$cell.produce.out" p9999_us)
  errors=$(result "$cell.produce.out" errors)

  # Consumes the backlog just written. If the consumers ever catch up with it the rate they show is
  # the backlog's size, not their speed; the row says so.
  client "$cell.consume" "$consume_warmup" bench-consume "$topic" "$group" "$consume_secs" "$consume_threads" || true
  ctps=$(result "$cell.consume.out" tps)
  if [ "$(ticks_total "$cell.consume.out")" -ge "$(ticks_total "$cell.produce.out")" ] \
    && [ "$(ticks_total "$cell.produce.out")" -gt 0 ]; then
    drained=" (backlog ran out)"
  fi
  fi

  # Tail latency at half load: an open loop at half the send rate measured above, the latency of
  # each send counted from when the schedule meant it to start.
  local half="$fixed_half" half_p9999="" half_tps=""
  if [ -z "$half" ] && [ -n "$tps" ] && awk -v t="$tps" 'BEGIN {exit !(t >= 2)}'; then
    half=$(awk -v t="$tps" 'BEGIN {printf "%d", t / 2}')
  fi
  if [ -n "$half" ]; then
    client "$cell.half" "$half_warmup" bench-produce "$topic" "$threads" $((half_secs + half_warmup)) "$body_bytes" "$half" || true
    half_p9999=$(result "$cell.half.out" p9999_us)
    half_tps=$(result "$cell.half.out" tps)
  fi

  stop_started
  # Keep the servers' own output beside the client's; drop the store (gigabytes) before the next run.
  local log
  for log in "$dir"/*.log "$dir"/proxy/*.log; do
    if [ -f "$log" ]; then cp "$log" "$cell.server-$(basename "$log")"; fi
  done
  rm -rf "$dir"

  # The row. CPU per message: the server's CPU seconds over the window, per send measured in it.
  python3 - "$target" "$flush" "$tps" "$sends" "$errors" "$p50" "$p99" "$p9999" "$cpu0" "$cpu1" "$t0" "$t1" \
    "$hz" "$ctps" "$drained" "$half" "$half_tps" "$half_p9999" <<'PY' | tee -a "$out/bench-grpc.md"
import sys
(target, flush, tps, sends, errors, p50, p99, p9999, cpu0, cpu1, t0, t1, hz, ctps, drained, half, half_tps,
 half_p9999) = sys.argv[1:]
ms = lambda us: f"{int(us) / 1000:.2f} ms" if us else "–"
num = lambda x: f"{float(x):,.0f}" if x else "–"
cpu = "–"
if cpu1 and sends and int(sends) > 0:
    used = (int(cpu1) - int(cpu0)) / int(hz)
    cpu = f"{used * 1e6 / int(sends):.1f} µs ({used / (float(t1) - float(t0)) * 100:.0f}% of a core)"
half_cell = f"{ms(half_p9999)} at {num(half_tps)}/s (asked {num(half)}/s)" if half else "–"
print(f"| {target} | {flush} | {num(tps)} | {cpu} | {ms(p50)} | {ms(p99)} | {ms(p9999)} | {errors or '–'} | "
      f"{num(ctps)}{drained} | {half_cell} |")
PY
}

# ---------------------------------------------------------------- the runs

{
  echo "# RocketMQ 5 gRPC SDK (rocketmq-client-java 5.2.0): petrel vs Apache RocketMQ 5.5.0's proxy"
  echo
  echo "$threads synchronous send threads sharing one Producer, ${body_bytes}-byte bodies, a topic of 8 queues;"
  echo "sends for $duration s with the first $warmup s not measured; $consume_threads SimpleConsumers (receive 32,"
  echo "invisible 30 s, long poll 2 s, ack each) for $consume_secs s with the first $consume_warmup s not measured;"
  echo "then an open loop at half the measured send rate for $half_secs s after $half_warmup s. Server CPU from /proc"
  echo "over the measured send window: petrel serve (its name server inside); the proxy JVM (broker inside) in"
  echo "local mode; proxy + broker JVMs in cluster mode; RocketMQ's name server not counted. Heaps: local $local_heap,"
  echo "cluster broker $broker_heap + proxy $proxy_heap. $(nproc) CPUs, $(uname -r)."
  echo
  echo "| server | flush | send msg/s | server CPU per message | P50 | P99 | P99.99 | send errors | consume msg/s | P99.99 at half rate |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$out/bench-grpc.md"

for flush in $modes; do
  for target in $targets; do
    run_cell "$target" "$flush"
  done
done

echo
cat "$out/bench-grpc.md"
echo
echo "Written to $out/bench-grpc.md; client and server logs beside it."
