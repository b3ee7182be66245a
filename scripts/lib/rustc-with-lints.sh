#!/usr/bin/env bash
# cargo's RUSTC_WORKSPACE_WRAPPER in scripts/test.sh: the workspace's own crates are compiled by
# clippy's driver (rustc with clippy's lints; the `[workspace.lints]` table applies as under
# `cargo clippy`), with warnings denied as `cargo clippy -- -D warnings` denies them. cargo calls
# a wrapper as `WRAPPER RUSTC ARGS…`, which is how the driver takes its arguments too.
exec "${PETREL_CLIPPY_DRIVER:?the path of clippy-driver}" "$@" -D warnings
