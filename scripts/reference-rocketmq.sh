#!/usr/bin/env bash
# Runs Apache RocketMQ 5.5.0 itself (its name server and one broker) on loopback with small
# heaps and a temporary store, so every comparison can be reproduced against the real thing.
#   scripts/reference-rocketmq.sh start [ASYNC_FLUSH|SYNC_FLUSH]   name server on $REF_NAMESRV_PORT (19876),
#                                                                  broker on $REF_BROKER_PORT (20911)
#   scripts/reference-rocketmq.sh stop
set -euo pipefail
source "$(dirname "$0")/reference-lib.sh"
state=${REF_STATE_DIR:-/tmp/petrel-reference-rocketmq}
ns_port=${REF_NAMESRV_PORT:-19876}
broker_port=${REF_BROKER_PORT:-20911}

case "${1:-}" in
  start)
    flush=${2:-ASYNC_FLUSH}
    [ -f "$state/pids" ] && { echo "already running (state in $state); stop it first"; exit 1; }
    ref_fetch
    rm -rf "$state" && mkdir -p "$state"
    ref_namesrv "$state" "$ns_port" >"$state/pids"
    ref_broker "$state" "127.0.0.1:$ns_port" "$broker_port" "$flush" >>"$state/pids"
    echo "Apache RocketMQ 5.5.0 running: name server 127.0.0.1:$ns_port, broker 127.0.0.1:$broker_port ($flush); logs in $state"
    ;;
  stop)
    [ -f "$state/pids" ] || { echo "not running"; exit 0; }
    # the broker first (it unregisters from the name server on the way out)
    tac "$state/pids" | while read -r pid; do kill "$pid" 2>/dev/null || true; done
    while read -r pid; do
      for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -9 "$pid" 2>/dev/null || true
    done <"$state/pids"
    rm -rf "$state"
    echo "stopped"
    ;;
  *)
    echo "usage: $0 start [ASYNC_FLUSH|SYNC_FLUSH] | stop" >&2
    exit 2
    ;;
esac
