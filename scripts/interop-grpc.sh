#!/usr/bin/env bash
# Interoperability over RocketMQ 5's gRPC protocol: the official 5.x SDKs of apache/rocketmq-clients
# against `petrel serve`, unchanged, with no proxy process:
#  - Java (rocketmq-client-java 5.2.0, tests/clients/grpc-java): Producer + SimpleConsumer, invisible
#    time and its change, PushConsumer with a failed delivery retried, FIFO message groups in order,
#    a delivery time, a transaction committed, one rolled back and one decided by check-back over
#    Telemetry, and refusals with RocketMQ's codes; `normal` over TLS (the port is permissive);
#  - Go (golang/v5 v5.1.3), Python (rocketmq-python-client 5.1.2), Node.js (rocketmq-client-nodejs
#    1.0.8) and Rust (the rocketmq crate 5.0.0), tests/clients/grpc-*: each sends and receives with
#    a SimpleConsumer, and each runs one of FIFO and delay;
#  - mixed protocols: the remoting Java client's messages received over gRPC and the reverse, and
#    gRPC clients listed by mqadmin consumerConnection / producerConnection / consumerProgress;
#  - an admin's questions to a gRPC push consumer: consumerStatus -s (its thread stacks over
#    Telemetry) and queryMsgById -d (the message consumed directly, VerifyMessageCommand);
#  - ACL 2.0: on a second broker with authentication and authorization, the Java, Go and Python
#    SDKs signing as a super user pass, and a wrong secret is refused with UNAUTHORIZED.
# Ports come from the kernel (bound to 0 and released), never fixed numbers.
set -euo pipefail
source "$(dirname "$0")/reference-lib.sh"
cd "$ref_root"
ref_fetch
source scripts/lib/petrel-bin.sh
echo "building the gRPC Java SDK test (rocketmq-client-java 5.2.0)"
mvn -q -B -f tests/clients/grpc-java/pom.xml package -DskipTests
mvn -q -B -f tests/clients/java/pom.xml package -DskipTests

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
ns_port=$(free_port)
broker_port=$(free_port)
grpc_port=$(free_port)
ns="127.0.0.1:$ns_port"
endpoint="127.0.0.1:$grpc_port"
work=$(mktemp -d)
export ROCKETMQ_HOME="$work"
petrel_pid=""
acl_pid=""
cleanup() {
  [ -n "$petrel_pid" ] && kill -9 "$petrel_pid" 2>/dev/null || true
  [ -n "$acl_pid" ] && kill -9 "$acl_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The gRPC port serves TLS and plain text side by side (tls.server.mode=permissive, the remoting
# ports' certificate): the Java SDK's `normal` scenario connects over TLS, every other in plain text.
if ! command -v openssl >/dev/null; then
  apt-get -o DPkg::Lock::Timeout=300 update -qq && apt-get -o DPkg::Lock::Timeout=300 install -y -qq openssl >/dev/null
fi
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/tls.key" -out "$work/tls.pem" -days 2 -subj "/CN=127.0.0.1" 2>/dev/null
tls_scenarios=" normal "

"$petrel" serve --store-dir "$work/data" --namesrv-listen "$ns" --listen-port "$broker_port" \
  --broker-ip 127.0.0.1 --set "grpcServerPort=$grpc_port" --set fastListenPort=0 --set haListenPort=0 \
  --set transactionCheckInterval=5000 \
  --set tls.server.mode=permissive --set tls.server.certPath="$work/tls.pem" --set tls.server.keyPath="$work/tls.key" >"$work/petrel.log" 2>&1 &
petrel_pid=$!
for _ in $(seq 1 100); do grep -qs "boot success" "$work/petrel.log" && break; sleep 0.1; done
grep -q "gRPC (RocketMQ 5 SDKs) listening.*TLS or plain text" "$work/petrel.log" || { tail -20 "$work/petrel.log"; echo "no gRPC port"; exit 1; }

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
not_ok() { failed=$((failed + 1)); echo "FAIL: $1"; }
admin() { ref_mqadmin "$ns" "$@"; }
# Every topic and group the scenarios use, created by one JVM (the remoting Java test's `setup`,
# through RocketMQ's admin API as mqadmin updateTopic -a +message.type=… / updateSubGroup -o do).
specs=(
  topic:GNormal:NORMAL group:GG1 topic:GInvisible:NORMAL group:GG2 topic:GPush:NORMAL group:GG3
  topic:GFifo:FIFO group:GG4:orderly topic:GDelay:DELAY group:GG5 topic:GTx:TRANSACTION group:GG6
  topic:GoNormal:NORMAL group:GoG1 topic:GoFifo:FIFO group:GoG2:orderly
  topic:PyNormal:NORMAL group:PyG1 topic:PyDelay:DELAY group:PyG2
  topic:NodeNormal:NORMAL group:NodeG1 topic:NodeFifo:FIFO group:NodeG2:orderly
  topic:RsNormal:NORMAL group:RsG1 topic:RsDelay:DELAY group:RsG2
  topic:GMixed group:GG8 group:GG9 topic:GListed:NORMAL group:GG10 topic:GAdmin:NORMAL group:GG11
)
setup_out=$(timeout 120 java -cp "tests/clients/java/target/classes:tests/clients/java/target/lib/*" petrel.ClientTest \
  setup "$ns" "127.0.0.1:$broker_port" "${specs[@]}" 2>"$work/setup.err") || { tail -20 "$work/setup.err"; echo "setup failed"; exit 1; }
echo "$setup_out" | tail -1
java_grpc() { # scenario args...: runs one scenario, its verdict is its last line
  local out ssl=false over=""
  if [[ "$tls_scenarios" == *" $1 "* ]]; then ssl=true over=" (over TLS)"; fi
  if out=$(timeout 120 java -Drocketmq.log.root="$work/sdk-logs" -Dpetrel.ssl=$ssl -jar tests/clients/grpc-java/target/grpc-java-test.jar "$endpoint" "$@" 2>"$work/java-$1.err"); then
    ok "Java gRPC $1$over: $(tail -1 <<<"$out" | sed 's/^ok: //')"
  else
    not_ok "Java gRPC $1$over: $(tail -1 <<<"$out")"
    tail -15 "$work/java-$1.err"
  fi
}
# Scenarios that mostly wait (for invisible times, delivery times, check-backs) run side by side,
# three at a time; each reports into its own file, read back in order.
java_grpc_batch() { # "scenario topic group" ...
  local pids=() line
  for line in "$@"; do
    # shellcheck disable=SC2086
    (java_grpc $line >"$work/verdict-${line%% *}" 2>&1) &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  for line in "$@"; do
    cat "$work/verdict-${line%% *}"
    if grep -q "^ok: " "$work/verdict-${line%% *}"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  done
}

echo "== Java gRPC SDK"
java_grpc_batch "normal GNormal GG1" "invisible GInvisible GG2" "push GPush GG3"
java_grpc_batch "fifo GFifo GG4" "delay GDelay GG5" "transaction GTx GG6" "errors GNormal GG7"

echo "== the Go, Python, Node.js and Rust gRPC SDKs"
sdks=target/grpc-sdks
if [ -n "${GRPC_SDKS_BUILD_PID:-}" ]; then
  # scripts/test.sh started the build in the background; it ends by writing its status.
  for _ in $(seq 1 1800); do kill -0 "$GRPC_SDKS_BUILD_PID" 2>/dev/null || break; sleep 0.5; done
else
  scripts/grpc-sdks-build.sh || true
fi
[ "$(cat "$sdks/done" 2>/dev/null)" = 0 ] || not_ok "building the SDK tests (see $sdks/*.log)"
sdk_run() { # lang scenario topic group
  case "$1" in
    go) timeout 120 "$sdks/go-test" "$endpoint" "$2" "$3" "$4" ;;
    python) timeout 120 "$sdks/venv/bin/python" tests/clients/grpc-python/test.py "$endpoint" "$2" "$3" "$4" ;;
    node) timeout 120 node tests/clients/grpc-node/test.js "$endpoint" "$2" "$3" "$4" ;;
    rust) timeout 120 "$sdks/rust-target/debug/grpc-rust-test" "$endpoint" "$2" "$3" "$4" ;;
  esac
}
sdk_batch() { # "lang scenario topic group" ...: side by side, verdicts read back in order
  local pids=() line
  for line in "$@"; do
    # shellcheck disable=SC2086
    (sdk_run $line >"$work/sdk-${line// /-}.out" 2>"$work/sdk-${line// /-}.err") &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  for line in "$@"; do
    local verdict
    verdict=$(tail -1 "$work/sdk-${line// /-}.out" 2>/dev/null)
    if [[ "$verdict" == ok:* ]]; then ok "${verdict#ok: }"; else
      not_ok "${line%% *} ${line#* }: ${verdict:-no verdict}"
      tail -15 "$work/sdk-${line// /-}.err"
    fi
  done
}
sdk_batch "go normal GoNormal GoG1" "python normal PyNormal PyG1" "node normal NodeNormal NodeG1" "rust normal RsNormal RsG1"
sdk_batch "go fifo GoFifo GoG2" "python delay PyDelay PyG2" "node fifo NodeFifo NodeG2" "rust delay RsDelay RsG2"

echo "== mixed protocols: one broker, one group state, both wires"
remoting_java() { # scenario args...
  local out
  if out=$(timeout 120 java -cp "tests/clients/java/target/classes:tests/clients/java/target/lib/*" petrel.ClientTest "$@" 2>"$work/remoting-$1.err"); then
    ok "remoting Java $1: $(tail -1 <<<"$out" | sed 's/^ok: //')"
  else
    not_ok "remoting Java $1: $(tail -1 <<<"$out")"
    tail -15 "$work/remoting-$1.err"
  fi
}
remoting_java mixed-send "$ns" GMixed 10
java_grpc mixed-in GMixed GG8 10
java_grpc mixed-out GMixed 10
remoting_java mixed-receive "$ns" GMixed GG9 10

echo "== mqadmin lists gRPC clients with their language and version, and their group's progress"
# The scenario keeps its producer and consumer online until the checks below are done (each
# mqadmin call is a JVM of its own, seconds on a slow machine), so nothing here races its life.
timeout 120 java -Drocketmq.log.root="$work/sdk-logs" -Dpetrel.scenarioSeconds=110 -jar tests/clients/grpc-java/target/grpc-java-test.jar "$endpoint" listed GListed GG10 "$work/listed.done" \
  >"$work/listed.out" 2>"$work/listed.err" &
listed_pid=$!
for _ in $(seq 1 600); do
  grep -q "^ready" "$work/listed.out" && break
  kill -0 "$listed_pid" 2>/dev/null || break
  sleep 0.1
done
# Online now; a heartbeat may still be on its way, so a few tries each.
connections=""
producers=""
for _ in $(seq 1 10); do
  grep -q "V5_2_0" <<<"$connections" || connections=$(admin consumerConnection -g GG10 || true)
  grep -q "JAVA" <<<"$producers" || producers=$(admin producerConnection -g GListed -t GListed || true)
  grep -q "V5_2_0" <<<"$connections" && grep -q "JAVA" <<<"$producers" && break
  kill -0 "$listed_pid" 2>/dev/null || break
  sleep 0.5
done
if grep -q "JAVA" <<<"$connections" && grep -q "V5_2_0" <<<"$connections"; then
  ok "consumerConnection lists the gRPC consumer as JAVA V5_2_0"
else
  not_ok "consumerConnection: expected a JAVA V5_2_0 client in:"
  echo "$connections" | tail -10
fi
if grep -q "JAVA" <<<"$producers"; then ok "producerConnection lists the gRPC producer under its topic"; else
  not_ok "producerConnection: expected a JAVA producer in:"
  echo "$producers" | tail -10
fi
progress=$(admin consumerProgress -g GG10 || true)
if grep -q "GListed" <<<"$progress"; then ok "consumerProgress shows the gRPC group's queues"; else
  not_ok "consumerProgress: expected GListed in:"
  echo "$progress" | tail -10
fi
touch "$work/listed.done"
if wait "$listed_pid"; then ok "Java gRPC listed: $(tail -1 "$work/listed.out" | sed 's/^ok: //')"; else
  not_ok "Java gRPC listed: $(tail -1 "$work/listed.out")"
  tail -15 "$work/listed.err"
fi

echo "== an admin's questions to a gRPC consumer, through the broker and its Telemetry stream"
timeout 120 java -Drocketmq.log.root="$work/sdk-logs" -jar tests/clients/grpc-java/target/grpc-java-test.jar "$endpoint" admin GAdmin GG11 \
  >"$work/admin.out" 2>"$work/admin.err" &
admin_pid=$!
for _ in $(seq 1 600); do
  grep -q "^ready" "$work/admin.out" && break
  kill -0 "$admin_pid" 2>/dev/null || break
  sleep 0.1
done
msgid=$(sed -n 's/^msgid //p' "$work/admin.out")
# The Java SDK's client id is host@pid@index@…: the one field of the listing with an @.
client_id=$(admin consumerConnection -g GG11 | awk '/V5_2_0/ { for (i = 1; i <= NF; i++) if ($i ~ /@/) print $i }' | head -1)
if [ -z "$msgid" ] || [ -z "$client_id" ]; then
  not_ok "the admin scenario's consumer did not get ready (msgid '$msgid', client '$client_id'): $(tail -1 "$work/admin.out")"
  tail -15 "$work/admin.err"
else
  status_out=$(admin consumerStatus -g GG11 -i "$client_id" -s || true)
  if grep -q "CONSUME_PASSIVELY" <<<"$status_out" && grep -q "#Consumer jstack#" <<<"$status_out" &&
    grep -q "java\.lang\.Thread" <<<"$status_out"; then
    ok "consumerStatus -s: the gRPC push consumer's properties and its thread stacks (PrintThreadStackTraceCommand over Telemetry)"
  else
    not_ok "consumerStatus -s: expected CONSUME_PASSIVELY and the client's jstack in:"
    echo "$status_out" | head -30
  fi
  direct_out=$(admin queryMsgById -t GAdmin -i "$msgid" -g GG11 -d "$client_id" || true)
  if grep -q "consumeResult=CR_SUCCESS" <<<"$direct_out"; then
    ok "queryMsgById -d: the gRPC push consumer consumed the message directly (VerifyMessageCommand): CR_SUCCESS"
  else
    not_ok "queryMsgById -d: expected consumeResult=CR_SUCCESS in:"
    echo "$direct_out" | tail -20
  fi
fi
wait "$admin_pid" || true
if [[ "$(tail -1 "$work/admin.out")" == ok:* ]]; then ok "Java gRPC admin: $(tail -1 "$work/admin.out" | sed 's/^ok: //')"; else
  not_ok "Java gRPC admin: $(tail -1 "$work/admin.out")"
  tail -15 "$work/admin.err"
fi

echo "== ACL 2.0 over gRPC: a second broker with authentication and authorization on"
acl_ns="127.0.0.1:$(free_port)"
acl_broker_port=$(free_port)
acl_endpoint="127.0.0.1:$(free_port)"
acl_secret="root-secret-1"
"$petrel" serve --store-dir "$work/data-acl" --namesrv-listen "$acl_ns" --listen-port "$acl_broker_port" \
  --broker-ip 127.0.0.1 --set "grpcServerPort=${acl_endpoint##*:}" --set fastListenPort=0 --set haListenPort=0 \
  --set authenticationEnabled=true --set authorizationEnabled=true \
  --set "initAuthenticationUser={\"username\":\"root\",\"password\":\"$acl_secret\"}" >"$work/petrel-acl.log" 2>&1 &
acl_pid=$!
for _ in $(seq 1 100); do grep -qs "boot success" "$work/petrel-acl.log" && break; sleep 0.1; done
timeout 120 java -Dpetrel.ak=root -Dpetrel.sk="$acl_secret" -cp "tests/clients/java/target/classes:tests/clients/java/target/lib/*" \
  petrel.ClientTest setup "$acl_ns" "127.0.0.1:$acl_broker_port" topic:AclJava:NORMAL group:AclJavaG topic:AclGo:NORMAL \
  group:AclGoG topic:AclPy:NORMAL group:AclPyG group:AclWrongG >"$work/acl-setup.out" 2>"$work/acl-setup.err" ||
  { tail -5 "$work/acl-setup.err"; not_ok "setting up the ACL broker's topics as the super user"; }
acl_java() { # secret scenario topic group: the Java SDK signing as root with SECRET
  timeout 120 java -Drocketmq.log.root="$work/sdk-logs" -Dpetrel.accessKey=root -Dpetrel.secretKey="$1" \
    -jar tests/clients/grpc-java/target/grpc-java-test.jar "$acl_endpoint" "${@:2}"
}
acl_java "$acl_secret" normal AclJava AclJavaG >"$work/acl-java.out" 2>"$work/acl-java.err" &
acl_java_pid=$!
acl_java "not-the-secret" normal AclJava AclWrongG >"$work/acl-wrong.out" 2>"$work/acl-wrong.err" &
acl_wrong_pid=$!
PETREL_ACCESS_KEY=root PETREL_SECRET_KEY="$acl_secret" timeout 120 "$sdks/go-test" "$acl_endpoint" normal AclGo AclGoG \
  >"$work/acl-go.out" 2>"$work/acl-go.err" &
acl_go_pid=$!
PETREL_ACCESS_KEY=root PETREL_SECRET_KEY="$acl_secret" timeout 120 "$sdks/venv/bin/python" tests/clients/grpc-python/test.py \
  "$acl_endpoint" normal AclPy AclPyG >"$work/acl-py.out" 2>"$work/acl-py.err" &
acl_py_pid=$!
wait "$acl_java_pid" "$acl_go_pid" "$acl_py_pid" || true
for sdk in java go py; do
  verdict=$(tail -1 "$work/acl-$sdk.out")
  if [[ "$verdict" == ok:* ]]; then ok "signed by the $sdk SDK as a super user: ${verdict#ok: }"; else
    not_ok "signed by the $sdk SDK as a super user: ${verdict:-no verdict}"
    tail -10 "$work/acl-$sdk.err"
  fi
done
wait "$acl_wrong_pid" || true
if [[ "$(tail -1 "$work/acl-wrong.out")" != ok:* ]] && grep -Eq "40100|UNAUTHORIZED|Unauthorized" "$work/acl-wrong.out" "$work/acl-wrong.err"; then
  ok "the Java SDK signing with a wrong secret is refused with UNAUTHORIZED (40100)"
else
  not_ok "a wrong secret: expected the scenario to fail with 40100: $(tail -1 "$work/acl-wrong.out")"
  tail -10 "$work/acl-wrong.err"
fi
kill "$acl_pid" 2>/dev/null || true

echo "passed=$passed failed=$failed"
[ "$failed" -eq 0 ]
