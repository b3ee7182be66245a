#!/usr/bin/env bash
# Re-records the captures in tests/vectors: real traffic between the official clients, mqadmin
# and Apache RocketMQ 5.5.0 itself (name server 9876, broker broker-a on 10911, a fresh store),
# captured with tcpdump on loopback, and each capture's listing written by our independent
# decoder (scripts/vectors/decode.py). Run as root (tcpdump); the ports must be free.
#
#   scripts/record-vectors.sh [OUT_DIR]     (default: a new temporary directory, printed at the end)
#
# The committed captures came from these steps on 2026-11-22. Re-recorded ones differ in times,
# ids and topic suffixes; the golden tests read whatever is in tests/vectors, so copy new ones
# there only together with the tests' few literal expectations (topic names, frame counts).
set -euo pipefail
source "$(dirname "$0")/reference-lib.sh"
cd "$ref_root"
out=${1:-$(mktemp -d)}
mkdir -p "$out"
ref_fetch
command -v tcpdump >/dev/null || { apt-get update -qq && apt-get install -y -qq tcpdump >/dev/null; }
command -v go >/dev/null || { apt-get update -qq && apt-get install -y -qq golang-go >/dev/null; }
mvn -q -B -f tests/clients/java/pom.xml package -DskipTests
(cd tests/clients/go && go build -o "$ref_root/target/go-client-test" .)

ns="127.0.0.1:9876"
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
pids+=("$(ref_namesrv "$work" 9876)")
pids+=("$(ref_broker "$work" "$ns" 10911 ASYNC_FLUSH)")
export ROCKETMQ_HOME="$work/home"

# capture NAME COMMAND...: records the traffic of one scenario into NAME.pcap and NAME.txt.
capture() {
  local name=$1
  shift
  tcpdump -i lo -s 0 -U -w "$out/$name.pcap" 'tcp port 9876 or tcp port 10911 or tcp port 10909' 2>/dev/null &
  local dump=$!
  sleep 1
  "$@" >"$work/$name.log" 2>&1 || { echo "$name: the scenario failed"; tail -20 "$work/$name.log"; exit 1; }
  sleep 2
  kill -INT "$dump"
  wait "$dump" || true
  python3 scripts/vectors/decode.py "$out/$name.pcap" >"$out/$name.txt"
  echo "$name: $(tail -1 "$out/$name.txt" | tr -d '#')"
}
java_vectors() { java -Xmx256m "$@"; }
cp="tests/clients/java/target/classes:tests/clients/java/target/lib/*"

ref_mqadmin "$ns" updateTopic -c DefaultCluster -t VectorTopic -r 4 -w 4 >/dev/null # so the first capture finds it
capture mqadmin-updateTopic ref_mqadmin "$ns" updateTopic -c DefaultCluster -t VectorTopic -r 4 -w 4
capture mqadmin-clusterList ref_mqadmin "$ns" clusterList
capture java-producer-3msgs java_vectors -cp "$cp" petrel.Vectors producer "$ns" VectorTopic
capture java-pushconsumer-3msgs java_vectors -cp "$cp" petrel.Vectors consumer "$ns" VectorTopic
capture java-producer-3msgs-rocketmq-serialization \
  java_vectors -Drocketmq.serialize.type=ROCKETMQ -cp "$cp" petrel.Vectors producer "$ns" VectorTopic2
capture go-client-3msgs target/go-client-test vectors "$ns" 3
echo "captures and listings in $out"
