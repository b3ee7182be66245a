#!/usr/bin/env bash
# Interoperability of the controller (tests/reference_controller.rs): Apache RocketMQ 5.5.0 brokers
# in controller mode elect, replicate and fail over through a group of three Petrel controllers,
# and mqadmin's controller commands read Petrel's answers; and a Petrel broker and a RocketMQ
# broker in one set replicate to each other over RocketMQ's controller-mode HA protocol and fail
# over each to the other (mqadmin getBrokerEpoch reads the Petrel broker's epochs).
set -euo pipefail
source "$(dirname "$0")/reference-lib.sh"
source "$(dirname "$0")/lib/workspace-test.sh"
cd "$ref_root"
ref_fetch
workspace_test reference_controller --quiet --ignored --test-threads=1 --nocapture
