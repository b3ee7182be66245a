#!/usr/bin/env bash
# Builds the gRPC SDK tests other than Java's, each from its registry: the Go test (Go module
# proxy), a Python virtual environment (PyPI), the Node.js test's modules (npm) and the Rust test
# (crates.io). Mostly downloads and one single-job Rust build: scripts/test.sh starts it in the
# background at low priority while the remoting interop scripts wait on their JVMs, and
# scripts/interop-grpc.sh waits for it (or runs it itself when started alone).
# Writes target/grpc-sdks/{go-test,venv,done}; `done` holds the exit status.
set -uo pipefail
cd "$(dirname "$0")/.."
out=target/grpc-sdks
mkdir -p "$out"
rm -f "$out/done"
status=0
step() { # name command...: runs one build step, records a failure and goes on
  local name=$1
  shift
  if ! "$@" >"$out/$name.log" 2>&1; then
    echo "building the $name SDK test failed; its log: $out/$name.log" >&2
    tail -20 "$out/$name.log" >&2
    status=1
  fi
}
if ! command -v go >/dev/null; then apt-get -o DPkg::Lock::Timeout=300 update -qq && apt-get -o DPkg::Lock::Timeout=300 install -y -qq golang-go >/dev/null; fi
if ! command -v npm >/dev/null; then apt-get -o DPkg::Lock::Timeout=300 update -qq && apt-get -o DPkg::Lock::Timeout=300 install -y -qq nodejs npm >/dev/null; fi
if ! python3 -m venv --help >/dev/null 2>&1; then apt-get -o DPkg::Lock::Timeout=300 update -qq && apt-get -o DPkg::Lock::Timeout=300 install -y -qq python3-venv >/dev/null; fi
step go bash -c "cd tests/clients/grpc-go && go build -o ../../../$out/go-test ."
step python bash -c "python3 -m venv $out/venv && $out/venv/bin/pip install -q -r tests/clients/grpc-python/requirements.txt"
step node bash -c "cd tests/clients/grpc-node && npm ci --no-audit --no-fund --loglevel=error"
step rust cargo build -j 1 --quiet --manifest-path tests/clients/grpc-rust/Cargo.toml --target-dir "$out/rust-target"
echo "$status" >"$out/done"
exit "$status"
