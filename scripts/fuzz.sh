#!/usr/bin/env bash
# Bounded fuzzing of what faces the network and the disk: the protocol decoders (frame, message),
# seeded from the captures in tests/vectors; the SQL92 selector compiler, seeded from selectors of
# every construct; the HA port's parsers and handshake (ha_wire); a replica's scanner of what its
# master streams (replica) and crash recovery over any segment bytes (recovery), both seeded with
# the captured stored records; the JSON request bodies (json_bodies); the broker's access map
# (access) and what reaches a controller (controller_rpc), seeded with the captured frames.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 25; at most 120 from the test command)
#   scripts/fuzz.sh --build                 (install cargo-fuzz and build the set's targets, run none:
#                                            the test command does this in the background)
#   env FUZZ_TARGETS="replica recovery": only those targets
#   env FUZZ_SET=decoders: the decoders' targets alone, without the broker's and the controller's
#                          request readers (access, controller_rpc), whose trees double the build;
#                          the test command's choice, whose proptests cover those two
# Each target's executions are appended to fuzz/logs/executions.tsv (target, seconds, runs).
# Needs cargo-fuzz (installed here if missing) and a nightly toolchain; without nightly the
# stable compiler is used with RUSTC_BOOTSTRAP, which cargo-fuzz's flags need.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-${FUZZ_SECONDS:-25}}"

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "installing cargo-fuzz"
  # A debug build: the tool only drives cargo, so its own speed does not matter, and the suite's
  # machine builds it in less time.
  cargo install cargo-fuzz --locked --quiet --debug
fi
toolchain=()
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  toolchain=(+nightly)
else
  export RUSTC_BOOTSTRAP=1
fi

decoder_targets=(frame message sql92 ha_wire replica recovery json_bodies)
case "${FUZZ_SET:-all}" in
  all) features=(--features services) all_targets=("${decoder_targets[@]}" access controller_rpc) ;;
  decoders) features=() all_targets=("${decoder_targets[@]}") ;;
  *) echo "FUZZ_SET is all or decoders, not ${FUZZ_SET}" >&2; exit 2 ;;
esac

if [ "${1:-}" = "--build" ]; then
  # -s none and the same features as the runs below, so that they find the targets built.
  cargo "${toolchain[@]}" fuzz build -s none "${features[@]}"
  exit 0
fi

corpus=fuzz/corpus
# FUZZ_TARGETS="replica recovery" runs only those (every corpus is seeded afresh either way).
read -r -a targets <<<"${FUZZ_TARGETS:-${all_targets[*]}}"
for t in "${all_targets[@]}"; do rm -rf "${corpus:?}/$t"; done
# The seeds' extractor: $PETREL_VECTORS_EXTRACTOR when the caller has it built (scripts/test.sh:
# its workspace build's), else built here. `cargo run -p` alone resolves other features than the
# workspace, and rebuilt part of the tree in the suite (38 s alone on the idle machine, 70 s of
# CPU).
if [ -n "${PETREL_VECTORS_EXTRACTOR:-}" ]; then
  "$PETREL_VECTORS_EXTRACTOR" "$corpus/frame" "$corpus/message"
else
  cargo run --quiet -p petrel-protocol --example extract_vectors -- "$corpus/frame" "$corpus/message"
fi
# Captured stored records seed the scanner and recovery; captured frames the request readers.
for t in replica recovery; do cp -r "$corpus/message" "$corpus/$t"; done
for t in access controller_rpc; do cp -r "$corpus/frame" "$corpus/$t"; done
mkdir -p "$corpus/ha_wire" "$corpus/json_bodies"
printf 'PTRLHA01' >"$corpus/ha_wire/magic"
printf '\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00\x00\x04abcd' >"$corpus/ha_wire/classic-frame"
printf '\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x10\x00' >"$corpus/ha_wire/autoswitch-handshake-then-report"
printf '%s' '{"clientID":"c1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"orders"}],"unitMode":false}],"producerDataSet":[{"groupName":"pg"}]}' >"$corpus/json_bodies/heartbeat"
printf '%s' '{"consumerGroup":"cg","clientId":"c1","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"orders"}]}' >"$corpus/json_bodies/lock"
printf '%s' '{"syncStateSet":[1,2],"syncStateSetEpoch":3}' >"$corpus/json_bodies/sync-state-set"
printf '%s' '{"groupName":"cg","consumeEnable":true,"retryQueueNums":1,"retryMaxTimes":16}' >"$corpus/json_bodies/group"
printf '%s' '{"topicConfigTable":{"orders":{"topicName":"orders","readQueueNums":8,"writeQueueNums":8,"perm":6}},"dataVersion":{"counter":1,"timestamp":1}}' >"$corpus/json_bodies/topics"
mkdir -p "$corpus/sql92"
i=0
while IFS= read -r seed; do
  i=$((i + 1))
  printf 'a=5;b=x;region=eu;TAGS=TagA\n%s' "$seed" >"$corpus/sql92/seed-$i"
done <<'SEEDS'
a > 3 AND b = 'x' OR NOT (c IS NULL)
a BETWEEN 1 AND 10 AND TAGS IN ('TagA', 'TagB')
region NOT STARTSWITH 'us' AND b CONTAINS 'x' AND b NOT ENDSWITH 'y'
a = 5L OR a <> -2.5E3 OR a >= .5 -- comment
/* block */ (((a < b))) AND TRUE AND NOT FALSE AND c IS NOT NULL
s = 'it''s' AND a NOT BETWEEN -1 AND +1 AND b NOT IN ('q')
SEEDS

mkdir -p fuzz/logs
for target in "${targets[@]}"; do
  echo "fuzzing $target for ${seconds}s"
  log="fuzz/logs/$target.log"
  # -s none: the decoders are safe Rust, so the sanitizer would only slow the search down.
  if ! cargo "${toolchain[@]}" fuzz run -s none "${features[@]}" "$target" "$corpus/$target" -- \
    -max_total_time="$seconds" -max_len=65536 -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz target $target failed; the crashing input is under fuzz/artifacts/$target"
    exit 1
  fi
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || tail -n 5 "$log"
  runs=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  printf '%s\t%s\t%s\n' "$target" "$seconds" "$runs" >>fuzz/logs/executions.tsv
done
echo "fuzzing passed"
