# Sourced by the scripts that run Apache RocketMQ (scripts/reference-rocketmq.sh) beside
# `petrel serve`. Set REF_NAMESRV_PORT and REF_BROKER_PORT first. Gives: `$petrel`, a release
# build of petrel (or $PETREL_BIN, to compare builds: scripts/lib/petrel-bin.sh), a work folder
# `$work` removed on exit with both brokers stopped, `json FILE EXPR` (a Python expression over
# the parsed file as `d`), and `start_petrel`.
source scripts/lib/petrel-bin.sh
work=$(mktemp -d)
export REF_STATE_DIR="$work/reference"
petrel_pid=""
cleanup() {
  [ -n "$petrel_pid" ] && kill "$petrel_pid" 2>/dev/null || true
  scripts/reference-rocketmq.sh stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {'d': d}))" "$@"; }

# start_petrel NAMESRV_PORT BROKER_PORT [petrel serve flags…]: a fresh `petrel serve` on loopback
# with its data in $work/petrel and its log in $work/petrel.log; sets petrel_pid, waits for boot.
# With PETREL_CGROUP (a cgroup folder) the broker joins it before it starts, so every page it
# touches is charged there.
start_petrel() {
  local ns_port=$1 broker_port=$2
  shift 2
  rm -rf "$work/petrel"
  (
    [ -n "${PETREL_CGROUP:-}" ] && echo "$BASHPID" >"$PETREL_CGROUP/cgroup.procs"
    exec "$petrel" serve --store-dir "$work/petrel" --namesrv-listen "127.0.0.1:$ns_port" \
      --listen-port "$broker_port" --broker-ip 127.0.0.1 "$@"
  ) >"$work/petrel.log" 2>&1 &
  petrel_pid=$!
  for _ in $(seq 1 100); do grep -q "boot success" "$work/petrel.log" && break; sleep 0.1; done
}
