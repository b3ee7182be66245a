#!/usr/bin/env bash
# The cold tier against a real S3-compatible server: SeaweedFS's S3 gateway (built by
# scripts/seaweedfs-build.sh; scripts/test.sh starts that build early, in the background, and
# names it in SEAWEEDFS_BUILD_PID), each test starting its own `weed server` on loopback ports.
#
#   scripts/tier-s3.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/workspace-test.sh
if [ -n "${SEAWEEDFS_BUILD_PID:-}" ]; then
  for _ in $(seq 1 2400); do kill -0 "$SEAWEEDFS_BUILD_PID" 2>/dev/null || break; sleep 0.5; done
fi
weed=$(scripts/seaweedfs-build.sh | tail -1)
"$weed" version
# One server at a time: each test's timeouts are seconds, and the suite's machine is small.
PETREL_WEED="$weed" workspace_test s3 --quiet --test-threads 1
# And through `petrel serve`: offload, retention after the tier, a kill -9 mid-upload, a slave
# catching up from the bucket, and RocketMQ's Java client reading four times what the disk keeps
# back from the first offset.
mvn -q -B -f tests/clients/java/pom.xml package -DskipTests
PETREL_WEED="$weed" workspace_test tier_binary --quiet --test-threads 1
