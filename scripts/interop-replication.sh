#!/usr/bin/env bash
# Interoperability of replication over RocketMQ's classic HA protocol (tests/reference_replication.rs):
# an Apache RocketMQ 5.5.0 slave follows a Petrel master, and a Petrel slave follows an Apache
# RocketMQ 5.5.0 master; each slave's commit log must hold the master's bytes and serve every message.
set -euo pipefail
source "$(dirname "$0")/reference-lib.sh"
source "$(dirname "$0")/lib/workspace-test.sh"
cd "$ref_root"
ref_fetch
workspace_test reference_replication --quiet --ignored --test-threads=1
