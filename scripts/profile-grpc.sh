#!/usr/bin/env bash
# Where `petrel serve` spends its CPU under RocketMQ 5's Java gRPC SDK: starts petrel serve
# (FLUSH, default ASYNC_FLUSH), makes an 8-queue NORMAL topic with mqadmin, runs the SDK's
# bench-produce (32 threads, 1 KiB, 60 s, the first 20 s a warm-up) and records `perf record -g`
# of the server for 20 s from the 25th second. Prints the server's CPU ticks over those 20 s, the
# client's result line, and leaves perf.data, a flat report and a call-graph report in OUT.
# Not part of the suite; needs perf and a release build.
#
#   scripts/profile-grpc.sh            env: FLUSH=ASYNC_FLUSH OUT=$(mktemp -d)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/reference-lib.sh
ref_fetch
flush=${FLUSH:-ASYNC_FLUSH}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
cargo build --quiet --release --bin petrel
mvn -q -B -f tests/clients/grpc-java/pom.xml package -DskipTests
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
ns="127.0.0.1:$(free_port)" broker_port=$(free_port) grpc_port=$(free_port)
target/release/petrel serve --store-dir "$out/data" --namesrv-listen "$ns" --listen-port "$broker_port" \
  --broker-ip 127.0.0.1 --set bindAddress=127.0.0.1 --set fastListenPort=0 --set "grpcServerPort=$grpc_port" \
  --set "flushDiskType=$flush" >"$out/petrel.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$out/data"' EXIT
for _ in $(seq 1 100); do grep -q "boot success" "$out/petrel.log" && break; sleep 0.1; done
ref_mqadmin "$ns" updateTopic -b "127.0.0.1:$broker_port" -t BenchGrpc -r 8 -w 8 -a +message.type=NORMAL >"$out/admin.log"
java -Xms1g -Xmx1g -Drocketmq.log.root="$out/sdk-logs" -Dpetrel.bench.warmupSeconds=20 \
  -jar tests/clients/grpc-java/target/grpc-java-test.jar "127.0.0.1:$grpc_port" bench-produce BenchGrpc 32 60 1024 \
  >"$out/produce.out" 2>"$out/produce.err" &
bench=$!
sleep 25
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
t0=$(ticks)
perf record -F 999 -g -p "$pid" -o "$out/perf.data" -- sleep 20 >/dev/null 2>&1
t1=$(ticks)
wait "$bench" || true
echo "server CPU ticks over the 20 s recorded: $((t1 - t0)) (of $(getconf CLK_TCK) a second)"
tail -1 "$out/produce.out"
perf report -i "$out/perf.data" --no-children --sort dso,symbol --stdio -g none >"$out/flat.txt" 2>/dev/null
perf report -i "$out/perf.data" --children --sort symbol --stdio -g none >"$out/children.txt" 2>/dev/null
echo "reports in $out (flat.txt, children.txt, perf.data)"
