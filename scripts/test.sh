#!/usr/bin/env bash
# The test command: the workspace's tests under nextest (every test has a watchdog,
# .config/nextest.toml), then the doc tests, then one summary line saying how many tests that need
# an outside toolchain (PTO-ISA, simpler) ran and how many were skipped, so a green run never
# hides that the emitted code was not built or run. With PTO_WSP_REQUIRE_TOOLCHAINS=1 a missing
# toolchain fails its tests instead. Arguments, when given, go to `cargo nextest run` instead of
# `--workspace` (and the doc tests are left out), e.g. `scripts/test.sh -p pto-wsp-cli`.
set -euo pipefail
cd "$(dirname "$0")/.."
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
export PTO_WSP_TOOLCHAIN_LOG="$log"
status=0
if [ $# -gt 0 ]; then
    cargo nextest run --profile ci "$@" || status=$?
else
    { cargo nextest run --workspace --profile ci && cargo test --workspace --doc; } || status=$?
fi
scripts/toolchain-summary.sh "$log"
exit "$status"
