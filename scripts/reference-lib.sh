# Shared by the scripts that run Apache RocketMQ 5.5.0 itself (sourced, not run).
# Fetches the jars from Maven Central into tests/reference/lib once; nothing fetched is committed.
ref_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ref_lib="$ref_root/tests/reference/lib"

ref_fetch() {
  if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
    echo "installing Maven and a Java runtime"
    apt-get update -qq && apt-get install -y -qq maven openjdk-17-jre-headless >/dev/null
  fi
  if [ ! -f "$ref_lib/rocketmq-broker-5.5.0.jar" ]; then
    echo "fetching Apache RocketMQ 5.5.0 from Maven Central"
    mvn -q -B -f "$ref_root/tests/reference/pom.xml" dependency:copy-dependencies -DoutputDirectory="$ref_lib"
  fi
}

# ref_wait_boot LOG PID TRIES WHAT: waits (TRIES half-seconds) for LOG to say "boot success" and
# prints PID; if PID dies or time runs out, shows the log's end and fails.
ref_wait_boot() {
  local log=$1 pid=$2 tries=$3 what=$4
  for _ in $(seq 1 "$tries"); do
    grep -q "boot success" "$log" && { echo "$pid"; return 0; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  tail -20 "$log" >&2
  echo "the reference $what did not start" >&2
  return 1
}

# ref_namesrv WORKDIR PORT: starts Apache RocketMQ's name server in the background, waits for it
# to boot, and prints its pid.
ref_namesrv() {
  local work=$1 port=$2
  mkdir -p "$work/home/conf"
  echo "listenPort=$port" >"$work/namesrv.conf"
  ROCKETMQ_HOME="$work/home" java -Xms256m -Xmx256m -cp "$ref_lib/*" org.apache.rocketmq.namesrv.NamesrvStartup \
    -c "$work/namesrv.conf" >"$work/namesrv.log" 2>&1 &
  ref_wait_boot "$work/namesrv.log" $! 60 "name server"
}

# ref_broker_conf STORE_DIR NAMESRV_ADDR LISTEN_PORT FLUSH_DISK_TYPE: prints the broker.conf of a
# master `broker-a` storing under STORE_DIR, with $REF_BROKER_CONF_EXTRA's lines last.
ref_broker_conf() {
  local store=$1 namesrv=$2 port=$3 flush=$4
  cat <<CONF
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
brokerIP1=127.0.0.1
listenPort=$port
namesrvAddr=$namesrv
storePathRootDir=$store
storePathCommitLog=$store/commitlog
autoCreateTopicEnable=true
flushDiskType=$flush
${REF_BROKER_CONF_EXTRA:-}
CONF
}

# ref_broker WORKDIR NAMESRV_ADDR LISTEN_PORT FLUSH_DISK_TYPE: starts a broker in the background,
# waits for it to boot, and prints its pid. Env: REF_BROKER_HEAP (default 512m); REF_CGROUP, a
# cgroup v1/v2 folder the broker joins before the JVM starts; REF_BROKER_CONF_EXTRA, broker.conf
# lines appended last (a later key wins: `brokerId=1` and `brokerRole=SLAVE` make a slave).
ref_broker() {
  local work=$1 namesrv=$2 port=$3 flush=$4
  mkdir -p "$work/home/conf" "$work/store"
  ref_broker_conf "$work/store" "$namesrv" "$port" "$flush" >"$work/broker.conf"
  local heap=${REF_BROKER_HEAP:-512m}
  # The subshell joins the cgroup, then becomes the JVM: the broker is charged from its first page.
  (
    [ -n "${REF_CGROUP:-}" ] && echo "$BASHPID" >"$REF_CGROUP/cgroup.procs"
    ROCKETMQ_HOME="$work/home" exec java "-Xms$heap" "-Xmx$heap" -cp "$ref_lib/*" org.apache.rocketmq.broker.BrokerStartup \
      -c "$work/broker.conf"
  ) >"$work/broker.log" 2>&1 &
  ref_wait_boot "$work/broker.log" $! 120 "broker"
}

# ref_controller WORKDIR PEERS SELF_ID: starts one of Apache RocketMQ's own controllers (DLedger,
# standalone) in the background, waits for it to boot, and prints its pid. PEERS is
# `n0-host:port;n1-host:port;…`; brokers reach each controller on its peer address.
ref_controller() {
  local work=$1 peers=$2 self=$3
  mkdir -p "$work/home/conf" "$work/store"
  cat >"$work/controller.conf" <<CONF
controllerDLegerGroup=group1
controllerDLegerPeers=$peers
controllerDLegerSelfId=$self
controllerStorePath=$work/store
controllerType=DLedger
enableElectUncleanMaster=false
scanNotActiveBrokerInterval=${REF_SCAN_INTERVAL_MS:-5000}
notifyBrokerRoleChanged=true
CONF
  ROCKETMQ_HOME="$work/home" java -Xms128m -Xmx128m -cp "$ref_lib/*" org.apache.rocketmq.controller.ControllerStartup \
    -c "$work/controller.conf" >"$work/controller.log" 2>&1 &
  ref_wait_boot "$work/controller.log" $! 60 "controller"
}

# ref_mqadmin NAMESRV_ADDR ARGS...: the official admin tool, given at most 120 s (a command that
# hangs prints its threads and fails instead of stalling the suite).
ref_mqadmin() {
  local ns=$1
  shift
  ROCKETMQ_HOME="${ROCKETMQ_HOME:-/tmp}" timeout --signal=QUIT --kill-after=5 120 \
    java -Xmx128m -cp "$ref_lib/*" org.apache.rocketmq.tools.command.MQAdminStartup "$@" -n "$ns" 2>&1
}
