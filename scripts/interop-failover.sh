#!/usr/bin/env bash
# Failover under the official Java client (issue: failover without losing an acknowledged
# message). Three `petrel serve` brokers of one set in controller mode
# (allAckInSyncStateSet=true), three `petrel controller`s and `petrel namesrv`; RocketMQ's Java
# producer (rocketmq-client 5.5.0, tests/clients/java, scenario `failover`) sends without pause
# and a push consumer reads, while PETREL_FAILOVER_KILLS times (default 3) the master is hit by a
# fault: kill -9 (then restarted), and every third time SIGSTOP instead, held until another broker
# is master and then SIGCONT, so that the old master resumes believing it leads
# (PETREL_FAILOVER_FAULTS=kill for kill -9 only). Either way it must rejoin as a replica. Every
# SEND_OK message must be consumed. For each fault it prints the time to the new master's
# promotion (from its log); the client prints the longest time between two SEND_OKs.
set -euo pipefail
source "$(dirname "$0")/reference-lib.sh"
cd "$ref_root"
ref_fetch
source scripts/lib/petrel-bin.sh
mvn -q -B -f tests/clients/java/pom.xml package -DskipTests

kills=${PETREL_FAILOVER_KILLS:-3}
faults=${PETREL_FAILOVER_FAULTS:-kill,stop}
work=$(mktemp -d)
ns="127.0.0.1:29786"
controller_ports=(29787 29788 29789)
broker_ports=(29730 29740 29750)
controller_pids=()
broker_pids=("" "" "")
java_pid=""
cleanup() {
  for p in "${controller_pids[@]}" "${broker_pids[@]}" "$java_pid" "${ns_pid:-}"; do
    [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
  done
  if [ -n "${PETREL_FAILOVER_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

wait_port() {
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing listens on $1" >&2
  return 1
}

"$petrel" namesrv --listen "$ns" >"$work/namesrv.log" 2>&1 &
ns_pid=$!
disown "$ns_pid"
peers=""
for i in 0 1 2; do peers+="${peers:+;}n$i-127.0.0.1:${controller_ports[$i]}"; done
controller_addr=""
for p in "${controller_ports[@]}"; do controller_addr+="${controller_addr:+;}127.0.0.1:$p"; done
for i in 0 1 2; do
  "$petrel" controller --set "controllerDLegerPeers=$peers" --set "controllerDLegerSelfId=n$i" \
    --set "controllerStorePath=$work/c$i" --set scanNotActiveBrokerInterval=200 >"$work/c$i.log" 2>&1 &
  controller_pids+=($!)
  disown $!
done
for p in "${controller_ports[@]}"; do wait_port "$p"; done
wait_port 29786

start_broker() { # index
  local i=$1
  "$petrel" serve --store-dir "$work/b$i" --namesrv-addr "$ns" --listen-port "${broker_ports[$i]}" \
    --broker-ip 127.0.0.1 --set enableControllerMode=true --set "controllerAddr=$controller_addr" \
    --set brokerName=broker-a --set allAckInSyncStateSet=true --set controllerHeartBeatTimeoutMills=3000 \
    --set brokerHeartbeatInterval=300 --set syncBrokerMetadataPeriod=300 --set checkSyncStateSetPeriod=300 \
    --set haMaxTimeSlaveNotCatchup=3000 --set fastListenPort=0 >>"$work/b$i.log" 2>&1 &
  broker_pids[$i]=$!
  disown $!
  wait_port "${broker_ports[$i]}"
}

# The broker that became master last (highest epoch): "became master epoch=N".
master_epoch() { # index → its last epoch as master, or 0
  local e
  e=$({ grep -o "became master epoch=[0-9]*" "$work/b$1.log" 2>/dev/null || true; } | tail -1 | sed 's/.*=//')
  echo "${e:-0}"
}
current_master() {
  local best=-1 who=""
  for i in 0 1 2; do
    local e
    e=$(master_epoch "$i")
    if [ "$e" -gt "$best" ]; then best=$e; who=$i; fi
  done
  echo "$who $best"
}
in_sync_members() { # from the master's log: the size of the last SyncStateSet it had confirmed
  local n
  n=$({ grep -o "SyncStateSet changed from=.* to={[0-9, ]*}" "$work/b${1:-x}.log" 2>/dev/null || true; } | tail -1 |
    sed 's/.*to={//;s/}//' | tr ',' '\n' | grep -c . || true)
  echo "${n:-0}"
}

for i in 0 1 2; do start_broker "$i"; done
read -r master epoch < <(current_master)
for _ in $(seq 1 300); do
  read -r master epoch < <(current_master)
  [ "$epoch" -gt 0 ] && [ "$(in_sync_members "$master")" -eq 3 ] && break
  sleep 0.1
done
echo "master: broker $master (epoch $epoch), SyncStateSet of $(in_sync_members "$master")"

mkdir -p "$work/java"
java -Xmx256m -cp "tests/clients/java/target/classes:tests/clients/java/target/lib/*" petrel.ClientTest failover "$ns" "$work/java" \
  >"$work/java.log" 2>&1 &
java_pid=$!
sleep 5

failed=0
for k in $(seq 1 "$kills"); do
  read -r master epoch < <(current_master)
  fault=kill
  if [[ "$faults" == *stop* ]] && [ $((k % 3)) -eq 0 ]; then fault=stop; fi
  if [ "$fault" = kill ]; then kill -9 "${broker_pids[$master]}"; else kill -STOP "${broker_pids[$master]}"; fi
  killed=$(date +%s.%N)
  promoted=""
  for _ in $(seq 1 1000); do
    read -r now_master now_epoch < <(current_master)
    if [ "$now_epoch" -gt "$epoch" ]; then promoted=$now_master; break; fi
    sleep 0.01
  done
  if [ -z "$promoted" ]; then
    echo "FAIL: fault $k: no new master within 10 s"
    failed=1
    break
  fi
  at=$(grep "became master epoch=$now_epoch" "$work/b$promoted.log" | tail -1 | cut -d' ' -f1)
  echo "fault $k ($fault): broker $master hit; broker $promoted master (epoch $now_epoch) after $(awk -v a="$(date -d "$at" +%s.%N)" -v b="$killed" 'BEGIN { printf "%.3f", a - b }') s"
  if [ "$fault" = kill ]; then
    start_broker "$master"
  else
    # It wakes up as master of an old epoch: its writes get no acknowledgement, and it must
    # learn the new epoch and follow.
    kill -CONT "${broker_pids[$master]}"
  fi
  for _ in $(seq 1 300); do
    [ "$(in_sync_members "$promoted")" -eq 3 ] && break
    sleep 0.1
  done
  echo "fault $k: broker $master rejoined; SyncStateSet of $(in_sync_members "$promoted")"
  sleep 2
done

touch "$work/java/stop"
if ! wait "$java_pid"; then failed=1; fi
java_pid=""
grep -E "FAIL|failover:" "$work/java.log" || true
if [ "$failed" -ne 0 ]; then
  echo "--- java"; tail -30 "$work/java.log"
  for i in 0 1 2; do echo "--- broker $i"; grep -v " INFO " "$work/b$i.log" | tail -15; done
  exit 1
fi
echo "failover under the official Java client: passed"
