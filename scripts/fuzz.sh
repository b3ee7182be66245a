#!/usr/bin/env bash
# Bounded fuzzing of the protocol decoders, seeded from the captures in tests/vectors, and of the
# SQL92 selector compiler, seeded from selectors of every construct.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 45; at most 120 from the test command)
# Needs cargo-fuzz (installed here if missing) and a nightly toolchain; without nightly the
# stable compiler is used with RUSTC_BOOTSTRAP, which cargo-fuzz's flags need.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-${FUZZ_SECONDS:-45}}"

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "installing cargo-fuzz"
  cargo install cargo-fuzz --locked --quiet
fi
toolchain=()
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  toolchain=(+nightly)
else
  export RUSTC_BOOTSTRAP=1
fi

corpus=fuzz/corpus
rm -rf "$corpus/frame" "$corpus/message" "$corpus/sql92"
cargo run --quiet -p petrel-protocol --example extract_vectors -- "$corpus/frame" "$corpus/message"
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
for target in frame message sql92; do
  echo "fuzzing $target for ${seconds}s"
  log="fuzz/logs/$target.log"
  # -s none: the decoders are safe Rust, so the sanitizer would only slow the search down.
  if ! cargo "${toolchain[@]}" fuzz run -s none "$target" "$corpus/$target" -- \
    -max_total_time="$seconds" -max_len=65536 -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz target $target failed; the crashing input is under fuzz/artifacts/$target"
    exit 1
  fi
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || tail -n 5 "$log"
done
echo "fuzzing passed"
