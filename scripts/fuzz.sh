#!/usr/bin/env bash
# Bounded fuzzing of the protocol decoders, seeded from the captures in tests/vectors.
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
rm -rf "$corpus/frame" "$corpus/message"
cargo run --quiet -p petrel-protocol --example extract_vectors -- "$corpus/frame" "$corpus/message"

mkdir -p fuzz/logs
for target in frame message; do
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
