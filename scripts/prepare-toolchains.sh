#!/usr/bin/env bash
# Fetches the PTO-ISA tile library (header-only C++, CPU simulation with -D__CPU_SIM) at the
# commit pto-wsp is tested against, into $PTO_ISA_ROOT (default $HOME/.cache/pto-wsp/pto-isa).
# Nothing of it is copied into this repository; tests that need it look there and print one
# `skipped: no PTO-ISA at ...` line when it is absent.
set -euo pipefail

PTO_ISA_REPO="${PTO_ISA_REPO:-https://github.com/cannmirror/pto-isa.git}"
PTO_ISA_COMMIT="defdb75fd81036a809b1cbae7539e17a9afcb5f0"
ROOT="${PTO_ISA_ROOT:-$HOME/.cache/pto-wsp/pto-isa}"

if [ -d "$ROOT/.git" ]; then
    current="$(git -C "$ROOT" rev-parse HEAD)"
    if [ "$current" = "$PTO_ISA_COMMIT" ]; then
        echo "PTO-ISA already at $PTO_ISA_COMMIT in $ROOT"
        exit 0
    fi
    git -C "$ROOT" fetch --quiet origin
else
    mkdir -p "$(dirname "$ROOT")"
    git clone --quiet "$PTO_ISA_REPO" "$ROOT"
fi
git -C "$ROOT" checkout --quiet "$PTO_ISA_COMMIT"
echo "PTO-ISA at $PTO_ISA_COMMIT in $ROOT"
if ! command -v g++ > /dev/null; then
    echo "note: g++ (12 or newer, -std=c++2b) is needed to build PTO-ISA's CPU simulation" >&2
fi
