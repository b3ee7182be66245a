#!/usr/bin/env bash
# Interoperability: a real Apache RocketMQ 5.5.0 broker registers with `petrel namesrv`, and the
# official mqadmin reads the cluster, creates a topic and reads its route through it.
set -euo pipefail
source "$(dirname "$0")/reference-lib.sh"
cd "$ref_root"
ref_fetch
source scripts/lib/petrel-bin.sh

ns="127.0.0.1:29876"
broker_port=30911
work=$(mktemp -d)
pids=()
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[$i]}" 2>/dev/null || true; done
  # the broker is not our child (it was started in a subshell), so poll rather than wait
  for p in "${pids[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

"$petrel" namesrv --listen "$ns" >"$work/namesrv.log" 2>&1 &
pids+=($!)
broker_pid=$(ref_broker "$work" "$ns" "$broker_port" ASYNC_FLUSH)
pids+=("$broker_pid")
export ROCKETMQ_HOME="$work/home"

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
  out=$(ref_mqadmin "$ns" clusterList)
  grep -qF "127.0.0.1:$broker_port" <<<"$out" && break
  sleep 0.5
done
check "clusterList shows the registered broker" "DefaultCluster          broker-a                0     127.0.0.1:$broker_port" "$out"
check "updateTopic through the name server" "create topic to 127.0.0.1:$broker_port success" "$(ref_mqadmin "$ns" updateTopic -c DefaultCluster -t PetrelInteropTopic -r 4 -w 4)"
route=$(ref_mqadmin "$ns" topicRoute -t PetrelInteropTopic)
check "topicRoute of the new topic" '"writeQueueNums":4' "$route"
check "topicRoute names the broker" "0:\"127.0.0.1:$broker_port\"" "$route"
check "topicList holds the new topic" "PetrelInteropTopic" "$(ref_mqadmin "$ns" topicList)"
check "topicRoute of an unknown topic fails as with RocketMQ" "No topic route info in name server for the topic: NoSuchTopic" "$(ref_mqadmin "$ns" topicRoute -t NoSuchTopic || true)"
echo "interop: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
