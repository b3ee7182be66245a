# Sourced by the scripts that run the petrel binary. Sets `petrel` to its path: $PETREL_BIN when
# the caller names a build (scripts/test.sh names its tests' own, so the suite compiles the tree
# once; a benchmark names the build under test), else the release build, made here.
if [ -n "${PETREL_BIN:-}" ]; then
  [ -x "$PETREL_BIN" ] || { echo "PETREL_BIN=$PETREL_BIN is not an executable file" >&2; exit 1; }
  petrel=$PETREL_BIN
else
  petrel_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  cargo build --quiet --release --bin petrel --manifest-path "$petrel_root/Cargo.toml"
  petrel=$petrel_root/target/release/petrel
fi
