#!/usr/bin/env bash
# Interoperability: the official clients against `petrel serve`, unchanged.
#  - Java (rocketmq-client 5.5.0, tests/clients/java): sync/async/oneway/batch sends, push
#    consumer with "A || B", lite pull consumer, two consumers splitting the queues, two orderly
#    consumers (queue locks) and one taking over when the other leaves; delay levels, timer
#    messages (setDeliverTimeMs, setDelayTimeSec, setDelayTimeMs), retries
#    through CONSUMER_SEND_MSG_BACK and the dead-letter queue; transactions with check-back;
#    queries by key and id; SQL92 selectors; group settings; request-reply; POP consumption;
#    broadcasting; offset resets; light message queues (enableLmq);
#  - RocketMQ's quickstart Producer and Consumer from rocketmq-example 5.5.0, unmodified;
#  - Go (rocketmq-client-go v2.1.2, tests/clients/go): producer (single and batch) and push
#    consumer with "A || B"; delay levels and retries; an SQL92 selector; request-reply;
#    transactions with check-back;
#  - mqadmin (rocketmq-tools 5.5.0): clusterList, updateTopic, topicList, topicRoute,
#    sendMessage, topicStatus, brokerStatus, consumerProgress, queryMsgByKey, queryMsgByUniqueKey,
#    queryMsgById, resetOffsetByTime, updateSubGroup, getConsumerConfig, deleteSubGroup,
#    setConsumeMode;
#  - ACL 2.0 and TLS on a second broker: mqadmin's user and ACL commands (createUser … listAcl)
#    signed from tools.yml, refusals of unsigned and unauthorized mqadmin, the Java client with
#    AclClientRPCHook (allowed, denied, uncovered, bad signature, unknown user, unsigned), and the
#    Java client with setUseTLS(true) verifying a certificate from a CA made here (and failing with
#    another CA);
#  - a SIGTERM restart in the middle of a Java session: clean exit, clean recovery, and a new
#    consumer of the same group resumes from the committed offsets with nothing lost.
set -euo pipefail
source "$(dirname "$0")/reference-lib.sh"
cd "$ref_root"
ref_fetch
if ! command -v openssl >/dev/null; then
  echo "installing openssl (the TLS checks make their own CA)"
  apt-get -o DPkg::Lock::Timeout=300 update -qq && apt-get -o DPkg::Lock::Timeout=300 install -y -qq openssl >/dev/null
fi
if ! command -v go >/dev/null; then
  echo "installing Go"
  apt-get -o DPkg::Lock::Timeout=300 update -qq && apt-get -o DPkg::Lock::Timeout=300 install -y -qq golang-go >/dev/null
fi
source scripts/lib/petrel-bin.sh
echo "building the Java client test (rocketmq-client 5.5.0)"
mvn -q -B -f tests/clients/java/pom.xml package -DskipTests
echo "building the Go client test (rocketmq-client-go v2.1.2)"
(cd tests/clients/go && go build -o "$ref_root/target/go-client-test" .)

ns="127.0.0.1:29886"
broker_port=29921
work=$(mktemp -d)
export ROCKETMQ_HOME="$work"
petrel_pid=""
consumer_pid=""
ext_pid=""
ref_ns_pid=""
acl_pid=""
cleanup() {
  [ -n "$consumer_pid" ] && kill -9 "$consumer_pid" 2>/dev/null || true
  [ -n "$petrel_pid" ] && kill -9 "$petrel_pid" 2>/dev/null || true
  [ -n "$ext_pid" ] && kill -9 "$ext_pid" 2>/dev/null || true
  [ -n "$ref_ns_pid" ] && kill -9 "$ref_ns_pid" 2>/dev/null || true
  [ -n "$acl_pid" ] && kill -9 "$acl_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
not_ok() { failed=$((failed + 1)); echo "FAIL: $1"; }
check() { # name, expected text, output
  if grep -qF -- "$2" <<<"$3"; then ok "$1"; else
    not_ok "$1: expected '$2' in:"
    echo "$3" | tail -20
  fi
}
boots=0
start_petrel() {
  "$petrel" serve --store-dir "$work/data" --namesrv-listen "$ns" --listen-port "$broker_port" \
    --broker-ip 127.0.0.1 --set enablePropertyFilter=true --set enableLmq=true --set enableMultiDispatch=true >>"$work/petrel.log" 2>&1 &
  petrel_pid=$!
  boots=$((boots + 1))
  for _ in $(seq 1 100); do
    [ "$(grep -c "boot success" "$work/petrel.log")" -ge "$boots" ] && return 0
    sleep 0.1
  done
  tail -20 "$work/petrel.log"
  echo "petrel serve did not start" >&2
  exit 1
}
stop_petrel() { # SIGTERM must flush, checkpoint and exit 0 (within 60 s)
  kill -TERM "$petrel_pid"
  local rc=0 waited=0
  while kill -0 "$petrel_pid" 2>/dev/null && [ "$waited" -lt 600 ]; do sleep 0.1; waited=$((waited + 1)); done
  if kill -0 "$petrel_pid" 2>/dev/null; then
    echo "petrel serve still runs 60 s after SIGTERM"
    command -v gdb >/dev/null && timeout 60 gdb -p "$petrel_pid" -batch -ex 'thread apply all bt 12' 2>/dev/null | grep -v '^\[' | head -400
    kill -9 "$petrel_pid"
  fi
  wait "$petrel_pid" || rc=$?
  petrel_pid=""
  if [ "$rc" -eq 0 ] && grep -q "shutdown complete" "$work/petrel.log"; then ok "SIGTERM: clean shutdown, exit 0"; else
    not_ok "SIGTERM: exit status $rc"
    tail -20 "$work/petrel.log"
  fi
}
# Every client run is bounded, so a hang fails one check instead of the whole suite's time: at the
# limit a JVM gets SIGQUIT (it prints every thread's stack), then SIGKILL; the broker's log tail
# and, where gdb is installed, its threads' stacks are shown too.
JAVA_LIMIT_S=300
java_test() { # scenario ARGS...: the scenario's output, filtered; all of it when it fails
  local log="$work/java-$1.log" rc=0
  timeout --signal=QUIT --kill-after=10 "$JAVA_LIMIT_S" java -Xmx256m -Dpetrel.stamp="$stamp" \
    -cp "tests/clients/java/target/classes:tests/clients/java/target/lib/*" petrel.ClientTest "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then quiet <"$log"; return 0; fi
  grep -v 'SLF4J\|logback\||-' "$log" | tail -400
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "Java scenario $1 ran past ${JAVA_LIMIT_S}s; the broker's log:"
    tail -60 "$work/petrel.log"
    if [ -n "$petrel_pid" ] && command -v gdb >/dev/null; then
      timeout 60 gdb -p "$petrel_pid" -batch -ex 'thread apply all bt 12' 2>/dev/null | grep -v '^\[' | head -400
    fi
  fi
  return "$rc"
}
admin() { ref_mqadmin "$ns" "$@" | grep -v '|-' || true; }
java_check() { if java_test "$1" "$ns"; then ok "$2"; else not_ok "Java client $1 scenario"; fi; }
go_check() { if timeout 180 target/go-client-test "$1" "$ns"; then ok "$2"; else not_ok "Go client $1 scenario"; fi; }
quiet() { grep -v '^\s*at \|SLF4J\|logback\||-' || true; }

stamp=$$
start_petrel

echo "== Java client"
java_check basic "Java client: producer (sync, async, oneway, batch), push, lite pull, queue split"
java_check orderly "Java client: orderly consumers lock disjoint queues, consume each order in sequence, and one takes over when the other leaves"
java_check orderlydead "Java client: an orderly listener's message failing past maxReconsumeTimes goes to the dead-letter queue and the queue goes on in order"
java_check delayed "Java client: delay levels, RECONSUME_LATER back after the retry delay, dead letters after maxReconsumeTimes"
java_check timer "Java client: timer messages (setDeliverTimeMs, setDelayTimeSec, setDelayTimeMs) in the order of their times, no sooner, each once"
java_check query "Java client: queryMessage by key and viewMessage by id find what was sent"
java_check sql "Java client: an SQL92 selector (MessageSelector.bySql) gets exactly what it picks; one that does not compile stops start() with 23"
java_check groupconfig "Java admin API: a group created with consumption off gets nothing, its retry topic has its retryQueueNums, turned on it gets everything once, deleted it is gone"
java_check request "Java client: request-reply: sync and async requests answered through the reply topic, an unanswered one times out, a reply for a client that is gone is refused"
java_check pop "Java client: POP consumption: two consumers share one queue, every message once with its POP_CK handle, RECONSUME_LATER back after 10 s, an unacked message revived after its invisible time"
java_check broadcast "Java client: two broadcasting consumers of one group each get every message once"
java_check reset "Java client: resetOffsetByTimestamp moves a running consumer back, and it gets exactly the later messages again"
java_check transaction "Java client: transactional producer: commit, rollback, and unknown resolved by the broker's check"
java_check lmq "Java client: light message queues (INNER_MULTI_DISPATCH) read back with a pull consumer, each message with its offsets, long polling, offsets of a %LMQ% group, bad names refused"

echo "== RocketMQ's own quickstart Producer and Consumer (rocketmq-example 5.5.0), unmodified"
example() { timeout --signal=QUIT --kill-after=10 300 java -Xmx256m -Drocketmq.namesrv.addr="$ns" -cp "tests/clients/java/target/lib/*" "org.apache.rocketmq.example.quickstart.$1"; }
sent_ok=$(example Producer 2>&1 | grep -c "sendStatus=SEND_OK" || true)
[ "$sent_ok" -eq 1000 ] && ok "quickstart Producer: 1000 SEND_OK" || not_ok "quickstart Producer: $sent_ok of 1000 SEND_OK"
# java itself in the background (not a function's subshell), so the kill below reaches it: a
# consumer left running would rejoin the group the next time a broker starts on this port.
java -Xmx256m -Drocketmq.namesrv.addr="$ns" -cp "tests/clients/java/target/lib/*" org.apache.rocketmq.example.quickstart.Consumer \
  >"$work/quickstart-consumer.log" 2>&1 &
consumer_pid=$!
received=0
for _ in $(seq 1 600); do
  received=$(grep -c "Receive New Messages" "$work/quickstart-consumer.log" || true)
  [ "$received" -ge 1000 ] && break
  sleep 0.1
done
kill "$consumer_pid" 2>/dev/null || true
wait "$consumer_pid" 2>/dev/null || true
if [ "$received" -ge 1000 ]; then ok "quickstart Consumer: received all 1000"; else
  not_ok "quickstart Consumer: received $received of 1000"
  grep -v '|-' "$work/quickstart-consumer.log" | tail -20
fi

echo "== Go client"
if timeout 180 target/go-client-test "$ns"; then ok "Go client: producer and push consumer"; else not_ok "Go client"; fi
go_check delayed "Go client: delay levels, ConsumeRetryLater back after the retry delay"
go_check sql "Go client: an SQL92 selector gets exactly what it picks"
go_check request "Go client: requests answered with CreateReplyMessage"
go_check transaction "Go client: transactional producer: commit, rollback, and undecided committed by the broker's check"

echo "== mqadmin"
check "clusterList shows broker-a" "DefaultCluster          broker-a                0     127.0.0.1:$broker_port" "$(admin clusterList)"
check "updateTopic" "create topic to 127.0.0.1:$broker_port success" "$(admin updateTopic -c DefaultCluster -t PetrelAdminTopic -r 4 -w 4)"
check "topicList" "PetrelAdminTopic" "$(admin topicList)"
check "topicRoute" '"readQueueNums":4' "$(admin topicRoute -t PetrelAdminTopic)"
check "sendMessage" "SEND_OK" "$(admin sendMessage -t PetrelAdminTopic -p hello -b broker-a -i 2)"
check "topicStatus shows the message in queue 2" "broker-a                          2     0                     1" "$(admin topicStatus -t PetrelAdminTopic)"
status=$(admin brokerStatus -b "127.0.0.1:$broker_port")
check "brokerStatus version" "V5_5_0" "$status"
check "brokerStatus put-lock statistics" "putMessageLockKind" "$status"
check "consumerProgress of the Java push group" "PetrelJava" "$(admin consumerProgress -g "cg_push_$stamp")"
check "resetOffsetByTime to the beginning answers each queue's offset" "#offset" "$(admin resetOffsetByTime -g "cg_push_$stamp" -t "PetrelJava$stamp" -s 0)"
check "consumerProgress after the reset: all 80 messages to consume again" "Diff Total: 80" "$(admin consumerProgress -g "cg_push_$stamp")"
sub_group="cg_admin_$stamp"
check "updateSubGroup creates a group" "create subscription group to 127.0.0.1:$broker_port success" \
  "$(admin updateSubGroup -b "127.0.0.1:$broker_port" -g "$sub_group" -r 3 -q 2 -d false)"
group_config=$(admin getConsumerConfig -g "$sub_group")
check "getConsumerConfig shows its retryMaxTimes" "$(printf '%-40s=  %s' retryMaxTimes 3)" "$group_config"
check "getConsumerConfig shows its consumeBroadcastEnable" "$(printf '%-40s=  %s' consumeBroadcastEnable false)" "$group_config"
check "deleteSubGroup" "delete subscription group [$sub_group] from broker [127.0.0.1:$broker_port] in cluster [DefaultCluster] success." \
  "$(admin deleteSubGroup -c DefaultCluster -g "$sub_group" -r true)"
if admin getConsumerConfig -g "$sub_group" | grep -q retryMaxTimes; then not_ok "getConsumerConfig: a deleted group still shows"; else
  ok "getConsumerConfig: a deleted group is gone"
fi
check "setConsumeMode puts a group in POP mode" "consume mode[POP]" \
  "$(admin setConsumeMode -c DefaultCluster -t PetrelAdminTopic -g "cg_popadmin_$stamp" -m POP -q 0)"
sent=$(admin sendMessage -t PetrelAdminTopic -p "find me" -k "petrel-key-$stamp other-key" -c TagQ -b broker-a -i 1)
msg_id=$(awk '/SEND_OK/ {print $NF}' <<<"$sent")
check "sendMessage with keys" "SEND_OK" "$sent"
check "queryMsgByKey finds the message by one of its keys" "$msg_id" "$(admin queryMsgByKey -t PetrelAdminTopic -k "petrel-key-$stamp")"
if admin queryMsgByKey -t PetrelAdminTopic -k "no-such-key-$stamp" | grep -qF "$msg_id"; then not_ok "queryMsgByKey: an unknown key found a message"; else ok "queryMsgByKey: an unknown key finds none"; fi
check "queryMsgByUniqueKey shows its keys" "[petrel-key-$stamp other-key]" "$(admin queryMsgByUniqueKey -t PetrelAdminTopic -i "$msg_id")"
check "queryMsgById shows its tag" "TagQ" "$(admin queryMsgById -t PetrelAdminTopic -i "$msg_id")"

echo "== restart in the middle of a Java session"
java_test restart "$ns" "$work" &
java_pid=$!
for _ in $(seq 1 1200); do [ -f "$work/ready" ] && break; kill -0 "$java_pid" 2>/dev/null || break; sleep 0.1; done
stop_petrel
start_petrel
check "restart recovered cleanly" "unclean=false" "$(grep "commit log recovered" "$work/petrel.log" | tail -1)"
touch "$work/restarted"
if wait "$java_pid"; then ok "restart: consumers resume from committed offsets, nothing lost"; else not_ok "Java client restart scenario"; fi

stop_petrel

echo "== ACL 2.0 and TLS"
# A second broker with authentication, authorization and permissive TLS (a certificate from a CA
# made here). mqadmin signs with the super user in ROCKETMQ_HOME/conf/tools.yml.
acl_ns="127.0.0.1:29887"
acl_addr="127.0.0.1:29961"
tls_dir="$work/tls"
mkdir -p "$tls_dir" "$work/acl-home/conf" "$work/user-home/conf"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tls_dir/ca.key" -out "$tls_dir/ca.pem" -days 2 -subj "/CN=Petrel test CA" 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tls_dir/other.key" -out "$tls_dir/other.pem" -days 2 -subj "/CN=Another CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$tls_dir/server.key" -out "$tls_dir/server.csr" -subj "/CN=127.0.0.1" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$tls_dir/ext.cnf"
openssl x509 -req -in "$tls_dir/server.csr" -CA "$tls_dir/ca.pem" -CAkey "$tls_dir/ca.key" -CAcreateserial \
  -out "$tls_dir/server.pem" -days 2 -extfile "$tls_dir/ext.cnf" 2>/dev/null
printf 'accessKey: rocketmq\nsecretKey: 12345678\n' >"$work/acl-home/conf/tools.yml"
printf 'accessKey: carol\nsecretKey: carol-pass\n' >"$work/user-home/conf/tools.yml"
"$petrel" serve --store-dir "$work/data-acl" --namesrv-listen "$acl_ns" --listen-port 29961 --broker-ip 127.0.0.1 \
  --set authenticationEnabled=true --set authorizationEnabled=true \
  --set 'initAuthenticationUser={"username":"rocketmq","password":"12345678"}' \
  --set tls.server.mode=permissive --set tls.server.certPath="$tls_dir/server.pem" --set tls.server.keyPath="$tls_dir/server.key" \
  >>"$work/petrel-acl.log" 2>&1 &
acl_pid=$!
for _ in $(seq 1 100); do grep -q "boot success" "$work/petrel-acl.log" && break; sleep 0.1; done
root_admin() { ROCKETMQ_HOME="$work/acl-home" ref_mqadmin "$acl_ns" "$@" | grep -v '|-' || true; }
user_admin() { ROCKETMQ_HOME="$work/user-home" ref_mqadmin "$acl_ns" "$@" | grep -v '|-' || true; }
unsigned_admin() { ROCKETMQ_HOME="$work" ref_mqadmin "$acl_ns" "$@" | grep -v '|-' || true; }
check "mqadmin createUser" "create user to $acl_addr success" "$(root_admin createUser -b "$acl_addr" -u bob -p bob-pass)"
check "mqadmin createUser -c (every broker of the cluster)" "create user to $acl_addr success" "$(root_admin createUser -c DefaultCluster -u carol -p carol-pass -t Normal)"
check "mqadmin updateUser" "update user to $acl_addr success" "$(root_admin updateUser -b "$acl_addr" -u bob -s disable)"
check "mqadmin getUser" "bob               bob-pass                Normal                  disable" "$(root_admin getUser -b "$acl_addr" -u bob)"
check "mqadmin listUser" "carol             carol-pass              Normal                  enable" "$(root_admin listUser -c DefaultCluster)"
check "mqadmin createAcl" "create acl to $acl_addr success" \
  "$(root_admin createAcl -c DefaultCluster -s User:carol -r Topic:orders,Group:g1 -a Pub,Sub -i 10.0.0.0/8 -d Allow)"
check "mqadmin updateAcl" "update acl to $acl_addr success" "$(root_admin updateAcl -b "$acl_addr" -s User:carol -r Topic:orders -a Pub -d Deny)"
check "mqadmin getAcl" "User:carol        Custom      Topic:orders            [Pub]" "$(root_admin getAcl -b "$acl_addr" -s User:carol)"
check "mqadmin listAcl" "User:carol        Custom      Group:g1                [Pub, Sub]            [10.0.0.0/8]              Allow" \
  "$(root_admin listAcl -c DefaultCluster)"
check "mqadmin deleteAcl" "delete acl to $acl_addr success" "$(root_admin deleteAcl -b "$acl_addr" -s User:carol -r Topic:orders)"
if root_admin listAcl -b "$acl_addr" -s carol | grep -q "Topic:orders"; then not_ok "listAcl: a deleted entry still shows"; else ok "mqadmin listAcl: the deleted entry is gone"; fi
check "mqadmin deleteUser" "delete user to $acl_addr success" "$(root_admin deleteUser -b "$acl_addr" -u bob)"
if root_admin listUser -b "$acl_addr" | grep -q "^bob "; then not_ok "listUser: a deleted user still shows"; else ok "mqadmin listUser: the deleted user is gone"; fi
check "unsigned mqadmin is refused with NO_PERMISSION" "CODE: 16" "$(unsigned_admin createUser -b "$acl_addr" -u eve -p eve-pass)"
check "a normal user may not change users" "User:carol has no permission to access Cluster:DefaultCluster" \
  "$(user_admin createUser -b "$acl_addr" -u eve -p eve-pass)"
check "a normal user may not create topics" "User:carol has no permission to access Topic:EveTopic" \
  "$(user_admin updateTopic -b "$acl_addr" -t EveTopic)"
if java_test acl "$acl_ns"; then
  ok "Java client with AclClientRPCHook: allowed sends and consumption pass; a denied topic, an uncovered topic, a wrong secret, an unknown user and an unsigned client get NO_PERMISSION naming why"
else not_ok "Java client acl scenario"; fi
tls_java() { # CA: the tls scenario with the client checking the broker's certificate against CA
  JAVA_TOOL_OPTIONS="-Dtls.test.mode.enable=false -Dtls.client.authServer=true -Dtls.client.trustCertPath=$1" java_test tls "$acl_ns"
}
if tls_java "$tls_dir/ca.pem"; then ok "Java client with setUseTLS(true) and the test CA: name server and broker over TLS, 10 messages sent and consumed once"; else
  not_ok "Java client tls scenario"
fi
if tls_java "$tls_dir/other.pem" >/dev/null 2>&1; then not_ok "a Java client trusting another CA connected"; else ok "a Java client trusting another CA cannot connect"; fi
kill -TERM "$acl_pid"
wait "$acl_pid" || true

echo "== through Apache RocketMQ 5.5.0's own name server"
# Users migrating keep their name servers: petrel serve registers with RocketMQ's, over one
# long-lived connection (RocketMQ's name server drops a broker whose connection closes), and
# the official clients find it there.
ref_ns_port=29906
ref_ns_pid=$(ref_namesrv "$work/ref-ns" "$ref_ns_port")
ref_ns="127.0.0.1:$ref_ns_port"
"$petrel" serve --store-dir "$work/data-ext" --namesrv-addr "$ref_ns" --listen-port 29951 \
  --broker-ip 127.0.0.1 >>"$work/petrel-ext.log" 2>&1 &
ext_pid=$!
for _ in $(seq 1 100); do grep -q "boot success" "$work/petrel-ext.log" && break; sleep 0.1; done
cluster=$(ref_mqadmin "$ref_ns" clusterList)
check "RocketMQ's name server lists petrel's broker" "DefaultCluster          broker-a                0     127.0.0.1:29951" "$cluster"
sent_ok=$(timeout --signal=QUIT --kill-after=10 300 java -Xmx256m -Drocketmq.namesrv.addr="$ref_ns" -cp "tests/clients/java/target/lib/*" \
  org.apache.rocketmq.example.quickstart.Producer 2>&1 | grep -c "sendStatus=SEND_OK" || true)
[ "$sent_ok" -eq 1000 ] && ok "quickstart Producer through RocketMQ's name server: 1000 SEND_OK" \
  || not_ok "quickstart Producer through RocketMQ's name server: $sent_ok of 1000 SEND_OK"
if timeout 180 target/go-client-test "$ref_ns"; then ok "Go client through RocketMQ's name server"; else
  not_ok "Go client through RocketMQ's name server"
fi
check "topicRoute from RocketMQ's name server" "127.0.0.1:29951" "$(ref_mqadmin "$ref_ns" topicRoute -t TopicTest)"
kill -TERM "$ext_pid"
wait "$ext_pid" || true
for _ in $(seq 1 50); do
  ref_mqadmin "$ref_ns" clusterList | grep -q "127.0.0.1:29951" || break
  sleep 0.2
done
if ref_mqadmin "$ref_ns" clusterList | grep -q "127.0.0.1:29951"; then not_ok "SIGTERM unregisters from RocketMQ's name server"; else
  ok "SIGTERM unregisters from RocketMQ's name server"
fi
kill "$ref_ns_pid" 2>/dev/null || true

echo "interop clients: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
