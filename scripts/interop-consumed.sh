#!/usr/bin/env bash
# Consumed, then lost in a failover? Two `petrel serve` brokers of one set in controller mode,
# three `petrel controller`s and `petrel namesrv`; the official Java client (rocketmq-client
# 5.5.0, tests/clients/java, scenarios consumed-read and consumed-verify). The sequence:
#   1. the slave is SIGSTOPped for 3 s and resumed: it must carry on with the same HA
#      connection (a resumed read returns EINTR, which is no failure);
#   2. the slave is SIGSTOPped again; it stays in the SyncStateSet (haMaxTimeSlaveNotCatchup
#      and haHousekeepingInterval are 60 s here, so that the JVM's pace cannot make the master
#      drop it before the kill);
#   3. the Java producer sends 512 messages to the master while a push consumer reads for 6 s;
#   4. the master is killed with kill -9 and the slave resumed: it is elected;
#   5. a new group reads the topic on the new master: every message the consumer was given must
#      be there, and the new master must serve new sends.
# Run twice: with allAckInSyncStateSet=false (RocketMQ's own ack default: sends wait for no
# slave, so an acknowledged message may be lost, but never a consumed one) and with Petrel's
# defaults (sends wait for the SyncStateSet: nothing acknowledged or consumed may be lost).
set -euo pipefail
source "$(dirname "$0")/reference-lib.sh"
cd "$ref_root"
ref_fetch
source scripts/lib/petrel-bin.sh
mvn -q -B -f tests/clients/java/pom.xml package -DskipTests

work=$(mktemp -d)
ns="127.0.0.1:29586"
controller_ports=(29587 29588 29589)
broker_ports=(29530 29540)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; { kill -9 "$p" && wait "$p"; } 2>/dev/null || true; done
  if [ -n "${PETREL_CONSUMED_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
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
in_sync_members() { # log → the size of the last SyncStateSet its master had confirmed
  local n
  n=$({ grep -o "SyncStateSet changed from=.* to={[0-9, ]*}" "$1" 2>/dev/null || true; } | tail -1 |
    sed 's/.*to={//;s/}//' | tr ',' '\n' | grep -c . || true)
  echo "${n:-0}"
}
java_client() {
  java -Xmx256m -cp "tests/clients/java/target/classes:tests/clients/java/target/lib/*" petrel.ClientTest "$@"
}

failed=0
run_case() { # name, extra broker keys...
  local name=$1
  shift
  local dir="$work/$name"
  mkdir -p "$dir/java"
  local peers="" controller_addr=""
  for i in 0 1 2; do
    peers+="${peers:+;}n$i-127.0.0.1:${controller_ports[$i]}"
    controller_addr+="${controller_addr:+;}127.0.0.1:${controller_ports[$i]}"
  done
  "$petrel" namesrv --listen "$ns" >"$dir/namesrv.log" 2>&1 &
  pids+=($!)
  for i in 0 1 2; do
    "$petrel" controller --set "controllerDLegerPeers=$peers" --set "controllerDLegerSelfId=n$i" \
      --set "controllerStorePath=$dir/c$i" --set scanNotActiveBrokerInterval=200 >"$dir/c$i.log" 2>&1 &
    pids+=($!)
  done
  for p in "${controller_ports[@]}" 29586; do wait_port "$p"; done
  local broker_pids=()
  for i in 0 1; do
    "$petrel" serve --store-dir "$dir/b$i" --namesrv-addr "$ns" --listen-port "${broker_ports[$i]}" \
      --broker-ip 127.0.0.1 --set enableControllerMode=true --set "controllerAddr=$controller_addr" \
      --set brokerName=broker-c --set controllerHeartBeatTimeoutMills=3000 --set brokerHeartbeatInterval=300 \
      --set syncBrokerMetadataPeriod=300 --set checkSyncStateSetPeriod=300 --set fastListenPort=0 \
      --set haMaxTimeSlaveNotCatchup=60000 --set haHousekeepingInterval=60000 "$@" \
      >"$dir/b$i.log" 2>&1 &
    broker_pids+=($!)
    pids+=($!)
    wait_port "${broker_ports[$i]}"
    # The first broker becomes master before the second registers.
    [ "$i" = 0 ] && for _ in $(seq 1 200); do grep -q "became master" "$dir/b0.log" && break; sleep 0.05; done
  done
  for _ in $(seq 1 300); do
    [ "$(in_sync_members "$dir/b0.log")" -eq 2 ] && break
    sleep 0.1
  done
  if ! grep -q "became master" "$dir/b0.log" || [ "$(in_sync_members "$dir/b0.log")" -ne 2 ]; then
    echo "FAIL $name: no master with a SyncStateSet of two"; failed=1; return
  fi
  local master=${broker_pids[0]} slave=${broker_pids[1]}

  # 1. A stopped and resumed slave keeps its connection.
  java_client consumed-read "$ns" "$dir/java" >"$dir/java-read.log" 2>&1 &
  local java_pid=$!
  pids+=($java_pid)
  for _ in $(seq 1 600); do [ -f "$dir/java/ready" ] && break; sleep 0.1; done
  local ended_before
  ended_before=$(grep -c "HA connection to the master ended" "$dir/b1.log" || true)
  kill -STOP "$slave"; sleep 3; kill -CONT "$slave"; sleep 2
  if [ "$(grep -c "HA connection to the master ended" "$dir/b1.log" || true)" != "$ended_before" ]; then
    echo "FAIL $name: the slave dropped its HA connection after SIGSTOP and SIGCONT:"
    grep "HA connection to the master ended" "$dir/b1.log" | tail -3
    failed=1
  else
    echo "ok $name: a slave stopped for 3 s and resumed kept its HA connection"
  fi

  # 2-3. Stopped again; the Java client produces and consumes on the master.
  kill -STOP "$slave"
  touch "$dir/java/stopped"
  for _ in $(seq 1 600); do [ -f "$dir/java/read" ] || ! kill -0 "$java_pid" 2>/dev/null && break; sleep 0.1; done
  if [ ! -f "$dir/java/read" ]; then failed=1; echo "FAIL $name: consumed-read"; tail -20 "$dir/java-read.log"; fi
  # The client prints its summary before it says "read"; a missing line is a failure, not a
  # reason for `set -e` to end the run without saying why.
  if grep -q "^consumed:" "$dir/java-read.log"; then
    grep "^consumed:" "$dir/java-read.log" | sed "s/^/$name: /"
  else
    failed=1; echo "FAIL $name: consumed-read printed no summary"; tail -20 "$dir/java-read.log"
  fi

  # 4. The master dies; the slave resumes and is elected.
  { kill -9 "$master" && wait "$master"; } 2>/dev/null || true
  kill -CONT "$slave"
  for _ in $(seq 1 300); do grep -q "became master" "$dir/b1.log" && break; sleep 0.1; done
  if ! grep -q "became master" "$dir/b1.log"; then
    echo "FAIL $name: the resumed slave was not elected within 30 s"; failed=1
    { grep -v " INFO " "$dir/b1.log" || true; } | tail -10
  fi

  # 5. What the consumer was given is on the new master.
  local strict=""
  [ "$name" = defaults ] && strict=strict
  if java_client consumed-verify "$ns" "$dir/java" $strict >"$dir/java-verify.log" 2>&1; then
    echo "ok $name: $(grep "^consumed:" "$dir/java-verify.log" | tail -1)"
  else
    failed=1
    echo "FAIL $name:"; grep -E "FAIL|^consumed:" "$dir/java-verify.log" | head -5
  fi
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; { kill -9 "$p" && wait "$p"; } 2>/dev/null || true; done
  pids=()
  sleep 0.5
}

run_case rocketmq-ack-keys --set allAckInSyncStateSet=false
run_case defaults
if [ "$failed" -ne 0 ]; then exit 1; fi
echo "consumed messages survive the failover: passed"
