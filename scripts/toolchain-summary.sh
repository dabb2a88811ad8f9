#!/usr/bin/env bash
# Prints the toolchain summary of a test run: how many tests that need an outside toolchain ran
# and how many were skipped, per toolchain, with each distinct reason for a skip. Reads the log
# the tests append to when PTO_WSP_TOOLCHAIN_LOG names it (lines `ran TOOLCHAIN TEST` and
# `skipped TOOLCHAIN TEST: WHY`, written by crates/pto-wsp-cli/tests/common/mod.rs and
# python/tests/support.py). Usage: scripts/toolchain-summary.sh LOG [LABEL]
set -euo pipefail
log="$1"
label="${2:-toolchain tests}"
count() { grep -c "^$1 $2 " "$log" 2>/dev/null || true; }
pto_isa=$(git -C "${PTO_ISA_ROOT:-$HOME/.cache/pto-wsp/pto-isa}" rev-parse --short=8 HEAD 2>/dev/null || echo absent)
simpler=$(git -C "${SIMPLER_ROOT:-$HOME/.cache/pto-wsp/simpler}" rev-parse --short=9 HEAD 2>/dev/null || echo absent)
pr=$(count ran pto-isa); ps=$(count skipped pto-isa)
sr=$(count ran simpler); ss=$(count skipped simpler)
mr=$(count ran mlir); ms=$(count skipped mlir)
mlir=$(for t in mlir-opt-22 mlir-opt-19 mlir-opt; do command -v "$t" >/dev/null && { echo "$t"; break; }; done || true)
echo "${label}: $((pr + sr + mr)) ran, $((ps + ss + ms)) skipped" \
    "(PTO-ISA ${pto_isa}: ${pr} ran, ${ps} skipped; simpler ${simpler}: ${sr} ran, ${ss} skipped;" \
    "MLIR ${mlir:-absent}: ${mr} ran, ${ms} skipped)"
# Each distinct reason once, with how many tests it skipped.
{ grep '^skipped ' "$log" 2>/dev/null || true; } | sed 's/^skipped [^ ]* [^:]*: //' | sort | uniq -c |
    sed 's/^ *\([0-9]*\) /  skipped \1: /'
if [ $((ps + ss + ms)) -gt 0 ]; then
    echo "  (set PTO_WSP_REQUIRE_TOOLCHAINS=1 to make a missing toolchain fail the run;" \
        "scripts/prepare-toolchains.sh and scripts/prepare-simpler.sh prepare them;" \
        "apt-get install mlir-22-tools the MLIR tools)"
fi
