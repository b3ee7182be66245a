# Sourced by the scripts that run the petrel binary. Sets `petrel` to its path: $PETREL_BIN when
# the caller names a build (a benchmark comparing builds names the one under test), else the
# release build, made here (scripts/test.sh has built it by then, so that is a no-op there).
if [ -n "${PETREL_BIN:-}" ]; then
  [ -x "$PETREL_BIN" ] || { echo "PETREL_BIN=$PETREL_BIN is not an executable file" >&2; exit 1; }
  petrel=$PETREL_BIN
else
  petrel_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  cargo build --quiet --release --bin petrel --manifest-path "$petrel_root/Cargo.toml"
  petrel=$petrel_root/target/release/petrel
fi
