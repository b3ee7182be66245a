#!/usr/bin/env bash
# The whole test suite: lints, every crate's tests (golden captures, property tests), and a
# bounded fuzzing run of the protocol decoders. This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings

echo "== tests"
cargo test --workspace

echo "== fuzzing (bounded)"
scripts/fuzz.sh "${FUZZ_SECONDS:-45}"
