#!/usr/bin/env bash
# Interoperability of replication over RocketMQ's classic HA protocol (tests/reference_replication.rs):
# an Apache RocketMQ 5.5.0 slave follows a Petrel master, and a Petrel slave follows an Apache
# RocketMQ 5.5.0 master; each slave's commit log must hold the master's bytes and serve every message.
set -euo pipefail
source "$(dirname "$0")/reference-lib.sh"
cd "$ref_root"
ref_fetch
cargo test --quiet --test reference_replication -- --ignored --test-threads=1
