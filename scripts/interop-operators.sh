#!/usr/bin/env bash
# What operators run, against `petrel serve`:
#  - RocketMQ 5's metric names, checked against RocketMQ itself: Apache RocketMQ 5.5.0 and
#    `petrel serve`, each started with metricsExporterType=PROM, run the same workload from the
#    official tools (mqadmin's updateTopic and updateSubGroup, then the Java client's scenario
#    `metrics` in tests/clients/java: normal, delay-level, timer and transactional sends, a push
#    consumer sending one message to the DLQ, a lite pull consumer), and are scraped while the
#    clients are still connected; scripts/metrics-diff.py fails on any rocketmq_* family, type or
#    label key RocketMQ exported that Petrel did not (and is shown to fail on a scrape missing one);
#  - message traces (traceTopicEnable): the workload's traced message's send and consume hops, by
#    `mqadmin queryMsgTraceById` and the dashboard's trace view;
#  - a real Prometheus (Debian's package) scraping `petrel serve`: the PromQL RocketMQ's dashboards
#    use, and every query of docs/grafana/petrel-dashboard.json, answer with the workload's data;
#  - the official RocketMQ Dashboard 2.1.0 (../shared/tools/rocketmq-dashboard-2.1.0.jar, beside
#    the clone; skipped, and said so, when absent) against `petrel serve`: every page's calls
#    (scripts/dashboard-walk.py), and each page rendered by headless Chromium (Debian's package)
#    into DASHBOARD_SHOTS. Its UI calls its API at localhost:8082, so the dashboard needs that port.
#
#   scripts/interop-operators.sh
#     env: KEEP=DIR keeps both scrapes there; DASHBOARD_SHOTS=target/dashboard-shots
set -euo pipefail
source "$(dirname "$0")/reference-lib.sh"
cd "$ref_root"
ref_fetch
source scripts/lib/petrel-bin.sh
if [ ! -d tests/clients/java/target/lib ]; then
  mvn -q -B -f tests/clients/java/pom.xml package -DskipTests
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
# A free broker port whose port - 2 is free too: the dashboard's admin calls go to the broker's
# fast channel there (its isVIPChannel default).
broker_port_pair() {
  python3 -c '
import socket
for _ in range(100):
    a = socket.socket(); a.bind(("127.0.0.1", 0)); port = a.getsockname()[1]
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", port - 2))
    except OSError:
        continue
    finally:
        a.close(); b.close()
    print(port); break
else:
    raise SystemExit("no free port pair")'
}
work=$(mktemp -d)
export ROCKETMQ_HOME="$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# workload NAME NAMESRV BROKER_ADDR METRICS_PORT: mqadmin creates a topic and a group, then the
# Java workload runs and the broker is scraped while its clients are connected; the scrape lands
# in $work/NAME.prom.
workload() {
  local name=$1 ns=$2 broker=$3 port=$4 hold="$work/$1-hold"
  mkdir -p "$hold"
  ref_mqadmin "$ns" updateTopic -b "$broker" -t MetricsAdminTopic -r 2 -w 2 >"$work/$name-admin.log"
  ref_mqadmin "$ns" updateSubGroup -b "$broker" -g MetricsAdminGroup >>"$work/$name-admin.log"
  if [ "$(grep -c "success" "$work/$name-admin.log")" -lt 2 ]; then
    cat "$work/$name-admin.log"
    echo "FAIL: mqadmin could not create the topic and the group on $name"
    return 1
  fi
  timeout --signal=QUIT --kill-after=10 180 java -Xmx256m \
    -cp "tests/clients/java/target/classes:tests/clients/java/target/lib/*" petrel.ClientTest metrics "$ns" "$hold" \
    >"$work/$name-client.log" 2>&1 &
  local client=$!
  pids+=("$client")
  for _ in $(seq 1 1200); do
    [ -f "$hold/ready" ] && break
    kill -0 "$client" 2>/dev/null || break
    sleep 0.1
  done
  if [ ! -f "$hold/ready" ]; then
    grep -v 'SLF4J\|logback' "$work/$name-client.log" | tail -40
    echo "FAIL: the workload against $name did not get ready"
    return 1
  fi
  curl -sSf "http://127.0.0.1:$port/metrics" >"$work/$name.prom"
  local rc=0
  if [ -n "${5:-}" ]; then "$5" || rc=$?; fi
  touch "$hold/done"
  if ! wait "$client"; then
    grep -v 'SLF4J\|logback' "$work/$name-client.log" | tail -40
    echo "FAIL: the workload against $name failed"
    return 1
  fi
  echo "ok: the workload ran against $name; $(grep -c '^rocketmq_' "$work/$name.prom") rocketmq_* samples scraped"
  return "$rc"
}

# promql QUERY: the query's result vector from the Prometheus scraping Petrel, as
# `{labels} value` lines.
promql() {
  curl -sSfG "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
for r in json.load(sys.stdin)["data"]["result"]:
    print(json.dumps(r["metric"], sort_keys=True), r["value"][1])'
}

# The queries RocketMQ's Grafana dashboards are built on, against a real Prometheus scraping
# petrel serve every second, while the workload's clients are connected and sending.
prometheus_queries() {
  local rate="sum(rate(rocketmq_messages_in_total[1m])) by (topic)" out=""
  for _ in $(seq 1 60); do
    out=$(promql "$rate" || true)
    grep -q '"topic": "MetricsTopic"} [0-9.]*[1-9]' <<<"$out" && break
    sleep 0.5
  done
  if grep -q '"topic": "MetricsTopic"} [0-9.]*[1-9]' <<<"$out"; then
    echo "ok: PromQL $rate: $(grep MetricsTopic <<<"$out")"
  else
    echo "FAIL: PromQL $rate gave no rate for MetricsTopic: $out"
    return 1
  fi
  local failed=0 q
  q='rocketmq_messages_in_total{topic="MetricsTopic",message_type="delay"}'
  out=$(promql "$q")
  if [ "$(awk '{print $NF}' <<<"$out")" = "1" ]; then echo "ok: PromQL $q = 1, the one delay-level message"; else
    echo "FAIL: PromQL $q: $out"
    failed=1
  fi
  q='sum(rocketmq_consumer_lag_messages) by (consumer_group)'
  out=$(promql "$q")
  if grep -q '"consumer_group": "cg_metrics"}' <<<"$out" && grep -q '"consumer_group": "cg_metrics_pull"}' <<<"$out"; then
    echo "ok: PromQL $q: both groups ($(tr '
' ' ' <<<"$out"))"
  else
    echo "FAIL: PromQL $q: $out"
    failed=1
  fi
  q='histogram_quantile(0.99, sum(rate(rocketmq_rpc_latency_milliseconds_bucket[1m])) by (le))'
  out=$(promql "$q")
  if awk '{v=$NF} END {exit !(NR == 1 && v ~ /^[0-9.e+-]+$/)}' <<<"$out"; then
    echo "ok: PromQL $q = $(awk '{print $NF}' <<<"$out") ms"
  else
    echo "FAIL: PromQL $q: $out"
    failed=1
  fi
  # Every query of the Grafana dashboard shipped in docs/ answers, with data.
  local dashboard_out
  if dashboard_out=$(python3 - "$prom_port" docs/grafana/petrel-dashboard.json <<'PY'
import json, sys, urllib.parse, urllib.request
port, path = sys.argv[1], sys.argv[2]
panels = [p for p in json.load(open(path))["panels"] if p["type"] != "row"]
empty = []
for p in panels:
    for t in p["targets"]:
        url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": t["expr"]})
        answer = json.load(urllib.request.urlopen(url))
        if answer["status"] != "success":
            sys.exit(f"{p['title']}: {t['expr']}: {answer}")
        if not answer["data"]["result"]:
            empty.append(f"{p['title']}: {t['expr']}")
if empty:
    sys.exit("no data for:\n  " + "\n  ".join(empty))
print(f"{sum(len(p['targets']) for p in panels)} queries of {len(panels)} panels")
PY
  ); then
    echo "ok: the Grafana dashboard's $dashboard_out answer with data"
  else
    echo "FAIL: the Grafana dashboard: $dashboard_out"
    failed=1
  fi
  return "$failed"
}

# Message traces: the workload's traced message, its send and consume hops read back by mqadmin.
trace_checks() {
  local id out=""
  id=$(cat "$work/petrel-hold/trace-msgid")
  for _ in $(seq 1 10); do
    out=$(ref_mqadmin "127.0.0.1:$ns_port" queryMsgTraceById -i "$id" || true)
    grep -q "^Pub .*pg_trace .*success" <<<"$out" && grep -q "^Sub .*cg_trace .*success" <<<"$out" && break
    sleep 1
  done
  if grep -q "^Pub .*pg_trace .*success" <<<"$out" && grep -q "^Sub .*cg_trace .*success" <<<"$out"; then
    echo "ok: mqadmin queryMsgTraceById: the traced message's send (pg_trace) and consume (cg_trace) hops"
  else
    echo "FAIL: mqadmin queryMsgTraceById -i $id:"
    echo "$out" | tail -20
    return 1
  fi
}

# While the workload's clients are connected to petrel serve: Prometheus, traces, then the
# dashboard.
petrel_checks() {
  local failed=0
  prometheus_queries || failed=1
  trace_checks || failed=1
  if [ -n "$dashboard" ]; then
    echo "== [$SECONDS s] the RocketMQ Dashboard 2.1.0 against petrel serve"
    local shots="${DASHBOARD_SHOTS:-target/dashboard-shots}"
    mkdir -p "$shots"
    python3 scripts/dashboard-walk.py "$dashboard" "127.0.0.1:$broker_port" "$shots" "$(cat "$work/petrel-hold/trace-msgid")" || failed=1
  fi
  return "$failed"
}

echo "== petrel serve with metricsExporterType=PROM, Prometheus scraping it, and the RocketMQ Dashboard"
ns_port=$(free_port) broker_port=$(broker_port_pair) metrics_port=$(free_port) prom_port=$(free_port)
dashboard_jar="$ref_root/../shared/tools/rocketmq-dashboard-2.1.0.jar"
if [ -n "${OPERATORS_TOOLS_PID:-}" ]; then
  # scripts/test.sh started the installs in the background.
  for _ in $(seq 1 1200); do kill -0 "$OPERATORS_TOOLS_PID" 2>/dev/null || break; sleep 0.5; done
fi
# The browser is for the dashboard's walk only.
if [ -f "$dashboard_jar" ]; then scripts/operators-tools.sh; else scripts/operators-tools.sh prometheus; fi
cat >"$work/prometheus.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: petrel
    static_configs:
      - targets: ["127.0.0.1:$metrics_port"]
YML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prometheus" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
pids+=($!)
disown
"$petrel" serve --store-dir "$work/petrel" --namesrv-listen "127.0.0.1:$ns_port" --listen-port "$broker_port" \
  --broker-ip 127.0.0.1 --set haListenPort=0 --set metricsExporterType=PROM --set metricsPromExporterHost=127.0.0.1 \
  --set "metricsPromExporterPort=$metrics_port" --set traceTopicEnable=true >"$work/petrel.log" 2>&1 &
pids+=($!)
disown
dashboard=""
if [ -f "$dashboard_jar" ]; then
  if ! python3 -c 'import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 8082))' 2>/dev/null; then
    echo "FAIL: port 8082 is taken; the dashboard's UI calls its API there"
    exit 1
  fi
  # Started now: it boots while RocketMQ runs its half of the workload.
  java -Xmx512m -jar "$dashboard_jar" --server.port=8082 --rocketmq.config.namesrvAddrs="127.0.0.1:$ns_port" \
    --rocketmq.config.dataPath="$work/dashboard-data" >"$work/dashboard.log" 2>&1 &
  dashboard_pid=$!
  pids+=("$dashboard_pid")
  disown
  dashboard=http://localhost:8082
else
  echo "skipped: the RocketMQ Dashboard walk ($dashboard_jar is not beside this clone)"
fi

echo "== Apache RocketMQ 5.5.0 with metricsExporterType=PROM"
ref_ns_port=$(free_port) ref_broker_port=$(free_port) ref_metrics_port=$(free_port)
ref_pids=("$(ref_namesrv "$work/ref" "$ref_ns_port")")
ref_pids+=("$(REF_BROKER_CONF_EXTRA="traceTopicEnable=true
metricsExporterType=PROM
metricsPromExporterHost=127.0.0.1
metricsPromExporterPort=$ref_metrics_port" ref_broker "$work/ref" "127.0.0.1:$ref_ns_port" "$ref_broker_port" ASYNC_FLUSH)")
pids+=("${ref_pids[@]}")
workload rocketmq "127.0.0.1:$ref_ns_port" "127.0.0.1:$ref_broker_port" "$ref_metrics_port"
kill -9 "${ref_pids[@]}" 2>/dev/null || true

echo "== [$SECONDS s] the same workload against petrel serve"
for _ in $(seq 1 100); do grep -q "boot success" "$work/petrel.log" && break; sleep 0.1; done
grep -q "boot success" "$work/petrel.log" || { tail -20 "$work/petrel.log"; echo "FAIL: petrel serve did not start"; exit 1; }
if [ -n "$dashboard" ]; then
  for _ in $(seq 1 240); do grep -q "Started App" "$work/dashboard.log" && break; sleep 0.5; done
  grep -q "Started App" "$work/dashboard.log" || { tail -30 "$work/dashboard.log"; echo "FAIL: the dashboard did not start"; exit 1; }
fi
workload petrel "127.0.0.1:$ns_port" "127.0.0.1:$broker_port" "$metrics_port" petrel_checks

if [ -n "$dashboard" ]; then
  echo "== [$SECONDS s] the dashboard's ACL page against petrel serve with ACL 2.0 on, the dashboard signing as its first user"
  kill -9 "$dashboard_pid" 2>/dev/null || true
  acl_ns_port=$(free_port) acl_broker_port=$(broker_port_pair)
  "$petrel" serve --store-dir "$work/petrel-acl" --namesrv-listen "127.0.0.1:$acl_ns_port" \
    --listen-port "$acl_broker_port" --broker-ip 127.0.0.1 --set haListenPort=0 \
    --set authenticationEnabled=true --set authorizationEnabled=true \
    --set 'initAuthenticationUser={"username":"rocketmq","password":"12345678"}' >"$work/petrel-acl.log" 2>&1 &
  pids+=($!)
  disown
  for _ in $(seq 1 100); do grep -q "boot success" "$work/petrel-acl.log" && break; sleep 0.1; done
  grep -q "boot success" "$work/petrel-acl.log" || { tail -20 "$work/petrel-acl.log"; echo "FAIL: petrel serve with ACL did not start"; exit 1; }
  # The first dashboard's port lingers a moment after it dies.
  port_8082_free() { python3 -c 'import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 8082))' 2>/dev/null; }
  for _ in $(seq 1 100); do port_8082_free && break; sleep 0.1; done
  port_8082_free || { echo "FAIL: port 8082 is still taken after the first dashboard ended"; exit 1; }
  java -Xmx512m -jar "$dashboard_jar" --server.port=8082 --rocketmq.config.namesrvAddrs="127.0.0.1:$acl_ns_port" \
    --rocketmq.config.dataPath="$work/dashboard-acl-data" --rocketmq.config.accessKey=rocketmq \
    --rocketmq.config.secretKey=12345678 >"$work/dashboard-acl.log" 2>&1 &
  pids+=($!)
  disown
  for _ in $(seq 1 240); do grep -q "Started App" "$work/dashboard-acl.log" && break; sleep 0.5; done
  grep -q "Started App" "$work/dashboard-acl.log" || { tail -30 "$work/dashboard-acl.log"; echo "FAIL: the dashboard did not start"; exit 1; }
  echo "[$SECONDS s] the dashboard is up"
  python3 scripts/dashboard-walk.py --acl "$dashboard" "${DASHBOARD_SHOTS:-target/dashboard-shots}"
fi

if [ -n "${KEEP:-}" ]; then
  mkdir -p "$KEEP" && cp "$work/rocketmq.prom" "$work/petrel.prom" "$KEEP/"
fi
echo "== every rocketmq_* family, type and label key RocketMQ exported, in Petrel's scrape"
python3 scripts/metrics-diff.py "$work/rocketmq.prom" "$work/petrel.prom"
# The comparison can fail: a scrape missing one label key of one family does.
sed '/^rocketmq_consumer_lag_messages{/s/,consumer_group="[^"]*"//' "$work/petrel.prom" >"$work/petrel-without-a-label.prom"
if python3 scripts/metrics-diff.py "$work/rocketmq.prom" "$work/petrel-without-a-label.prom" >"$work/negative.log"; then
  cat "$work/negative.log"
  echo "FAIL: the comparison passed a scrape without a label"
  exit 1
fi
grep "^DIFFERENT" "$work/negative.log" | sed 's/^/ok: caught: /'
