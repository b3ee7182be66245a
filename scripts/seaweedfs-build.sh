#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (Apache-2.0), whose S3 gateway is the object store of the tier's
# tests (crates/tier/tests/s3.rs), from the Go module proxy into target/seaweedfs/weed, once per
# version. Its go.mod has replace directives, so `go install …@version` refuses it: it is built
# as the main module, from a copy of the module's source.
#
#   scripts/seaweedfs-build.sh        (prints the binary's path)
set -euo pipefail
cd "$(dirname "$0")/.."
version=v0.0.0-20261109003541-7506e5f91cd6
out="$PWD/target/seaweedfs"
if [ -x "$out/weed" ] && [ "$(cat "$out/version" 2>/dev/null)" = "$version" ]; then
  echo "$out/weed"
  exit 0
fi
mkdir -p "$out"
module=$(go mod download -json "github.com/seaweedfs/seaweedfs@$version" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
cp -r "$module/." "$src"
chmod -R u+w "$src"
# Without a symbol table and DWARF (-s -w): the tests only run it, and the linker has less to write.
(cd "$src" && go build -ldflags="-s -w" -o "$out/weed.tmp" ./weed)
mv "$out/weed.tmp" "$out/weed"
echo "$version" >"$out/version"
echo "$out/weed"
