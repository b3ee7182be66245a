#!/usr/bin/env bash
# Interoperability: a real Apache RocketMQ 5.5.0 broker registers with `petrel namesrv`, and the
# official mqadmin reads the cluster, creates a topic and reads its route through it.
# Fetches the RocketMQ jars from Maven Central into tests/reference/lib (not committed).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
lib="$root/tests/reference/lib"
if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
  echo "installing Maven and a Java runtime"
  apt-get update -qq && apt-get install -y -qq maven openjdk-17-jre-headless >/dev/null
fi
if [ ! -f "$lib/rocketmq-broker-5.5.0.jar" ]; then
  echo "fetching Apache RocketMQ 5.5.0 from Maven Central"
  mvn -q -B -f tests/reference/pom.xml dependency:copy-dependencies -DoutputDirectory="$lib"
fi
cargo build --quiet --release --bin petrel

ns_port=29876
broker_port=30911
work=$(mktemp -d)
mkdir -p "$work/home/conf" "$work/store"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

target/release/petrel namesrv --listen "127.0.0.1:$ns_port" >"$work/namesrv.log" 2>&1 &
pids+=($!)
cat >"$work/broker.conf" <<CONF
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
brokerIP1=127.0.0.1
listenPort=$broker_port
namesrvAddr=127.0.0.1:$ns_port
storePathRootDir=$work/store
storePathCommitLog=$work/store/commitlog
autoCreateTopicEnable=true
CONF
export ROCKETMQ_HOME="$work/home"
java -Xms256m -Xmx256m -cp "$lib/*" org.apache.rocketmq.broker.BrokerStartup -c "$work/broker.conf" >"$work/broker.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do
  grep -q "boot success" "$work/broker.log" && break
  sleep 0.5
done
grep -q "boot success" "$work/broker.log" || { tail -20 "$work/broker.log"; echo "FAIL: the reference broker did not start"; exit 1; }

mqadmin() { java -Xmx128m -cp "$lib/*" org.apache.rocketmq.tools.command.MQAdminStartup "$@" -n "127.0.0.1:$ns_port" 2>&1; }
passed=0
failed=0
check() { # name, expected text, output
  if grep -qF -- "$2" <<<"$3"; then
    passed=$((passed + 1))
    echo "ok: $1"
  else
    failed=$((failed + 1))
    echo "FAIL: $1: expected '$2' in:"
    echo "$3" | tail -20
  fi
}
# the broker registers right after boot; give its first registration a moment
for _ in $(seq 1 20); do
  out=$(mqadmin clusterList)
  grep -qF "127.0.0.1:$broker_port" <<<"$out" && break
  sleep 0.5
done
check "clusterList shows the registered broker" "DefaultCluster          broker-a                0     127.0.0.1:$broker_port" "$out"
check "updateTopic through the name server" "create topic to 127.0.0.1:$broker_port success" "$(mqadmin updateTopic -c DefaultCluster -t PetrelInteropTopic -r 4 -w 4)"
route=$(mqadmin topicRoute -t PetrelInteropTopic)
check "topicRoute of the new topic" '"writeQueueNums":4' "$route"
check "topicRoute names the broker" "0:\"127.0.0.1:$broker_port\"" "$route"
check "topicList holds the new topic and TBW102" "PetrelInteropTopic" "$(mqadmin topicList)"
check "topicRoute of an unknown topic fails as with RocketMQ" "No topic route info in name server for the topic: NoSuchTopic" "$(mqadmin topicRoute -t NoSuchTopic || true)"
echo "interop: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
