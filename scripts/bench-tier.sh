#!/usr/bin/env bash
# The cold tier's figures (docs/benchmarks.md, "The cold tier"): `petrel serve` without a tier,
# then with one (SeaweedFS's S3 gateway on loopback, from scripts/seaweedfs-build.sh), the same
# workload from `petrel bench`: sends (the tier's offload running beside them), then a consumer
# from the beginning — hot (all on disk) without the tier, cold (the tiered segments deleted
# locally, fileReservedTime=0) with it; and each segment's upload time from the broker's log.
#
#   scripts/bench-tier.sh [OUT]
#     env: MESSAGES=300000 SIZE=1024 SEGMENT=67108864 PRODUCERS=4 ROUNDS=1
#          PETREL_BIN=target/release/petrel (another build of the broker, to compare builds; the
#          load generator stays target/release/petrel)
#          BROKER_CPUS=LIST BUCKET_CPUS=LIST (taskset lists): the brokers and `petrel bench` on
#          the first, SeaweedFS on the second, so that the bucket takes no CPU from the send
#          path, as a bucket on another machine would not (the brokers without a tier get the
#          same cores as those with one)
#
# ROUNDS=N runs the pair N times, alternating, each on a fresh broker (and its own prefix in the
# bucket), so that the send path's difference can be told from the noise between runs.
#
# LONG_MINUTES=M runs the long run instead: one broker with the tier and a hot retention of
# HOT_HOURS hours (fileReservedTime, default 0: only what the bucket lacks), a producer at RATE
# msg/s (default 5000) for M minutes, and every 10 s the local commit log's bytes and segments
# beside the segments tiered and the bucket's bytes: past the hot retention the disk must stay
# at what those hours wrote, the segment being written and the few not uploaded yet, whatever
# was sent. Prints one line per sample and a summary; samples land in OUT/long.tsv.
#
# The bucket is on loopback, where nobody can change a body on the way: the tier's brokers run
# with objectStoreSignPayload=false (signed bodies are the default over plain HTTP).
#
# Not part of the suite (minutes). Prints a Markdown table; reports land in OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-results/tier}
msgs=${MESSAGES:-300000}
size=${SIZE:-1024}
segment=${SEGMENT:-67108864}
producers=${PRODUCERS:-4}
rounds=${ROUNDS:-1}
cargo build --quiet --release --bin petrel
petrel_bin=${PETREL_BIN:-target/release/petrel}
weed=$(scripts/seaweedfs-build.sh | tail -1)
# The cores each side runs on (none named: wherever the scheduler puts them).
on_broker_cpus=()
on_bucket_cpus=()
[ -n "${BROKER_CPUS:-}" ] && on_broker_cpus=(taskset -c "$BROKER_CPUS")
[ -n "${BUCKET_CPUS:-}" ] && on_bucket_cpus=(taskset -c "$BUCKET_CPUS")
mkdir -p "$out"
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
ports() { python3 -c '
import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))' "$1"; }

cat >"$work/s3.json" <<'JSON'
{"identities":[{"name":"bench","credentials":[{"accessKey":"bench-access","secretKey":"bench-secret-0123"}],"actions":["Admin","Read","Write","List","Tagging"]}]}
JSON
read -r -a p <<<"$(ports 10)"
mkdir -p "$work/weed"
weed_cpu_s() { awk '{printf "%.1f", ($14 + $15) / 100}' "/proc/$weed_pid/stat"; }
"${on_bucket_cpus[@]}" "$weed" server -ip=127.0.0.1 -ip.bind=127.0.0.1 -metricsPort=0 -filer -s3 -volume.max=64 \
  -dir="$work/weed" -s3.config="$work/s3.json" -master.port="${p[0]}" -master.port.grpc="${p[1]}" \
  -volume.port="${p[2]}" -volume.port.grpc="${p[3]}" -filer.port="${p[4]}" -filer.port.grpc="${p[5]}" \
  -s3.port="${p[6]}" -s3.port.grpc="${p[7]}" -s3.port.iceberg="${p[8]}" -s3.port.lance="${p[9]}" >"$work/weed.log" 2>&1 &
weed_pid=$!
pids+=("$weed_pid")
endpoint="http://127.0.0.1:${p[6]}"
# The tier's settings for every broker that has one (its prefix is added per broker).
tier_sets=(objectStoreEndpoint="$endpoint" objectStoreBucket=petrel-bench objectStoreAccessKey=bench-access
  objectStoreSecretKey=bench-secret-0123 objectStoreSignPayload=false fileReservedTime=0)
for _ in $(seq 1 120); do curl -s -o /dev/null "$endpoint" && break; sleep 0.5; done
sleep 5 # the filer and a volume come up after the S3 port

# run NAME EXTRA_SET...: a broker, the sends, (with a tier: until the sealed segments left the
# disk), a consumer from the beginning; one table row.
run() {
  local name=$1
  shift
  local ns broker data="$work/$name"
  read -r ns broker <<<"$(ports 2)"
  # diskMaxUsedSpaceRatio=95: a file system that keeps many of its free blocks for root reads
  # as nearly full to the broker (it counts what it may use), whose forced clean-up would then
  # delete the segments the consumer is to read back.
  local sets=(--set haListenPort=0 --set "mappedFileSizeCommitLog=$segment" --set diskMaxUsedSpaceRatio=95)
  for kv in "$@"; do sets+=(--set "$kv"); done
  "${on_broker_cpus[@]}" "$petrel_bin" serve --store-dir "$data" --namesrv-listen "127.0.0.1:$ns" --listen-port "$broker" \
    --broker-ip 127.0.0.1 "${sets[@]}" >"$work/$name.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 1 100); do grep -q "boot success" "$work/$name.log" && break; sleep 0.1; done
  local weed_before weed_after
  weed_before=$(weed_cpu_s)
  "${on_broker_cpus[@]}" target/release/petrel bench produce -n "127.0.0.1:$ns" -t TierBench -s "$size" -p "$producers" --count "$msgs" -d 600 \
    --warmup 0 --broker-pid "$pid" -o "$out/$name-produce" >"$out/$name-produce.txt" 2>&1
  weed_after=$(weed_cpu_s)
  # Segments the offload had uploaded by the end of the sends (it yields to them:
  # tieredOffloadNice), beside the sealed segments there were.
  local during
  during="$({ grep "segment uploaded" "$work/$name.log" || true; } | wc -l)"
  if [[ "$name" == tier* ]]; then
    # Until the sealed segments are uploaded and gone from the disk (the segment being written
    # and the one the allocator prepared are all that is left; a last sealed one has a scan and
    # a retention pass more), so that the consumer reads from a bucket that takes no uploads
    # meanwhile; how long that took after the sends is the offload's catch-up.
    local waited_s=$SECONDS
    for _ in $(seq 1 1200); do
      [ "$(find "$data/commitlog" -maxdepth 1 -name '0*' | wc -l)" -le 2 ] && break
      sleep 0.5
    done
    during="$during, the rest $((SECONDS - waited_s)) s after"
    sleep 12
  fi
  "${on_broker_cpus[@]}" target/release/petrel bench consume -n "127.0.0.1:$ns" -t TierBench -s "$size" -c 1 --from-beginning \
    --count "$((msgs * 9 / 10))" -d 600 --warmup 0 -o "$out/$name-consume" >"$out/$name-consume.txt" 2>&1
  local uploads pull
  # The consumer's pulls that found messages: P50 / P99 / P99.9, request to answer.
  pull=$(awk -F'|' '/^\| pull \(found messages\)/ {gsub(/ /, ""); print $3 " / " $5 " / " $6}' "$out/$name-consume.txt")
  uploads=$({ grep "segment uploaded" "$work/$name.log" || true; } | sed -n 's/.*bytes=\([0-9]*\) elapsed_ms=\([0-9]*\).*/\1 \2/p' |
    awk '{b+=$1; t+=$2} END {if (t > 0) printf "%d segments, %.0f MB/s", NR, b / t / 1000; else print "–"}' || true)
  # The broker's CPU per message sent (its mean CPU over the sends, from the report), and the
  # CPU the object store's process took meanwhile (on this machine it shares the two cores).
  local tps pct per_msg
  tps=$(grep -m1 -o '[0-9.]* msg/s' "$out/$name-produce.txt" | cut -d' ' -f1 || echo 0)
  pct=$(grep -m1 -o 'CPU [0-9.]*%' "$out/$name-produce.txt" | tr -dc '0-9.' || echo 0)
  per_msg=$(awk -v p="${pct:-0}" -v t="${tps:-0}" 'BEGIN {if (t > 0) printf "%.1f µs", p * 10000 / t; else print "?"}')
  [[ "$name" == tier* ]] || during="–"
  printf '| %s | %s msg/s | %s | %s s | %s | %s | %s | %s |\n' "$name" "${tps:-?}" "$per_msg" \
    "$(awk -v a="$weed_after" -v b="$weed_before" 'BEGIN {printf "%.1f", a - b}')" \
    "$(grep -m1 -o '[0-9.]* msg/s' "$out/$name-consume.txt" || echo '?')" "${pull:-?}" "$during" "$uploads"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$data"
}

# long_run MINUTES: the long run (see the header).
long_run() {
  local minutes=$1 rate=${RATE:-5000} hot_hours=${HOT_HOURS:-0} ns broker data="$work/long" sets=()
  read -r ns broker <<<"$(ports 2)"
  for kv in "${tier_sets[@]}" tieredStoreFilePath=long; do
    [[ "$kv" == fileReservedTime=* ]] && kv="fileReservedTime=$hot_hours"
    sets+=(--set "$kv")
  done
  "${on_broker_cpus[@]}" "$petrel_bin" serve --store-dir "$data" --namesrv-listen "127.0.0.1:$ns" --listen-port "$broker" \
    --broker-ip 127.0.0.1 --set haListenPort=0 --set "mappedFileSizeCommitLog=$segment" --set diskMaxUsedSpaceRatio=95 \
    "${sets[@]}" >"$work/long.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 1 100); do grep -q "boot success" "$work/long.log" && break; sleep 0.1; done
  "${on_broker_cpus[@]}" target/release/petrel bench produce -n "127.0.0.1:$ns" -t TierLong -s "$size" -p "$producers" --rate "$rate" \
    -d "$((minutes * 60))" --warmup 0 --broker-pid "$pid" -o "$out/long-produce" >"$out/long-produce.txt" 2>&1 &
  local producer=$!
  printf 'seconds\tlocal_bytes\tlocal_segments\ttiered_segments\tbucket_bytes\n' >"$out/long.tsv"
  local started=$SECONDS
  while kill -0 "$producer" 2>/dev/null; do
    sleep 10
    printf '%s\t%s\t%s\t%s\t%s\n' "$((SECONDS - started))" "$(du -sb "$data/commitlog" | cut -f1)" \
      "$(find "$data/commitlog" -maxdepth 1 -name '0*' | wc -l)" "$({ cat "$data/tier/tier.manifest" 2>/dev/null || true; } | wc -l)" \
      "$(du -sb "$work/weed" | cut -f1)" | tee -a "$out/long.tsv"
  done
  # Past the hot retention (plus a minute for the retention pass and the segment's own span),
  # the local log must stop growing: its largest sample there beside its largest before.
  awk -F'\t' -v seg="$segment" -v hot_s="$((hot_hours * 3600 + 60))" 'NR > 1 {
      if ($2 > max) max = $2; n++; last = $4; bucket = $5
      if ($1 <= hot_s && $2 > before) before = $2
      if ($1 > hot_s) { after_n++; if ($2 > after) after = $2; if (after_min == "" || $2 < after_min) after_min = $2 } }
    END {printf "%d samples: local commit log at most %.0f MiB (%.1f segments), %d segments tiered at the end, bucket %.0f MiB\n", n, max / 1048576, max / seg, last, bucket / 1048576
      if (after_n > 0) printf "past the hot retention (%d samples): local %.0f-%.0f MiB, against at most %.0f MiB before\n", after_n, after_min / 1048576, after / 1048576, before / 1048576}' "$out/long.tsv"
  grep -m1 -o '[0-9.]* msg/s' "$out/long-produce.txt" || true
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

if [ -n "${LONG_MINUTES:-}" ]; then
  long_run "$LONG_MINUTES"
  exit 0
fi

echo "| broker | send | broker CPU per message sent | object store CPU during the sends | consume from the beginning | pull P50 / P99 / P99.9 | segments uploaded by the sends' end, all uploaded and deleted locally | uploads |"
echo "|---|---:|---:|---:|---:|---|---|---|"
for round in $(seq 1 "$rounds"); do
  suffix=""
  [ "$rounds" -gt 1 ] && suffix="-$round"
  run "no-tier$suffix"
  run "tier$suffix" "${tier_sets[@]}" "tieredStoreFilePath=bench$suffix"
done
