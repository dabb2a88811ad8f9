#!/usr/bin/env bash
# Prepares the Ascend task runtime "simpler" (github.com/hw-native-sys/simpler) for
# `pto-wsp run FILE --target ascend_a2a3sim` and the Ascend tests, in one command:
#
#   scripts/prepare-simpler.sh
#
# What it does (all outside this repository; nothing of simpler or PTO-ISA is copied here):
#   1. PTO-ISA at the tested commit in $PTO_ISA_ROOT (via scripts/prepare-toolchains.sh);
#   2. a simpler checkout at the tested commit in $SIMPLER_ROOT;
#   3. simpler's PTO-ISA pin: writes the PTO-ISA commit into $SIMPLER_ROOT/pto_isa.pin and
#      puts a clean clone at that commit in $SIMPLER_ROOT/build/pto-isa (simpler re-clones from
#      the network when that clone is missing or not at the pin);
#   4. a `g++-15` wrapper running the system g++ in $PTO_WSP_TOOLS_DIR (simpler compiles
#      simulated AICore kernels with the literal command `g++-15`);
#   5. a Python venv in $SIMPLER_VENV with simpler's build tools and numpy (no torch), and
#      `pip install --no-build-isolation -e $SIMPLER_ROOT`, building only the a2a3sim runtimes
#      (about 10 minutes on 2 cores).
#
# Defaults: SIMPLER_ROOT=$HOME/.cache/pto-wsp/simpler, PTO_ISA_ROOT=$HOME/.cache/pto-wsp/pto-isa,
# SIMPLER_VENV=$HOME/.cache/pto-wsp/simpler-venv, PTO_WSP_TOOLS_DIR=$HOME/.cache/pto-wsp/bin.
# pto-wsp reads the same variables with the same defaults. Re-running is cheap when all is done.
set -euo pipefail

SIMPLER_REPO="${SIMPLER_REPO:-https://github.com/hw-native-sys/simpler.git}"
SIMPLER_COMMIT="6ebaf7715"
CACHE="$HOME/.cache/pto-wsp"
SIMPLER_ROOT="${SIMPLER_ROOT:-$CACHE/simpler}"
PTO_ISA_ROOT="${PTO_ISA_ROOT:-$CACHE/pto-isa}"
SIMPLER_VENV="${SIMPLER_VENV:-$CACHE/simpler-venv}"
PTO_WSP_TOOLS_DIR="${PTO_WSP_TOOLS_DIR:-$CACHE/bin}"
export PTO_ISA_ROOT

here="$(cd "$(dirname "$0")" && pwd)"

# 1. PTO-ISA.
"$here/prepare-toolchains.sh"
pto_isa_head="$(git -C "$PTO_ISA_ROOT" rev-parse HEAD)"

# 2. simpler.
if [ ! -d "$SIMPLER_ROOT/.git" ]; then
    mkdir -p "$(dirname "$SIMPLER_ROOT")"
    git clone --quiet "$SIMPLER_REPO" "$SIMPLER_ROOT"
    git -C "$SIMPLER_ROOT" checkout --quiet "$SIMPLER_COMMIT"
fi
echo "simpler at $(git -C "$SIMPLER_ROOT" rev-parse --short HEAD) in $SIMPLER_ROOT"

# 3. The pin and the clean PTO-ISA clone simpler expects.
echo "$pto_isa_head" > "$SIMPLER_ROOT/pto_isa.pin"
pinned="$SIMPLER_ROOT/build/pto-isa"
if [ ! -d "$pinned/.git" ] || [ "$(git -C "$pinned" rev-parse HEAD)" != "$pto_isa_head" ] \
    || [ -n "$(git -C "$pinned" status --porcelain)" ]; then
    rm -rf "$pinned"
    mkdir -p "$SIMPLER_ROOT/build"
    git clone --quiet --no-checkout "$PTO_ISA_ROOT" "$pinned"
    git -C "$pinned" checkout --quiet --detach "$pto_isa_head"
fi
echo "simpler's PTO-ISA pin: $pto_isa_head"

# 4. g++-15 wrapper.
mkdir -p "$PTO_WSP_TOOLS_DIR"
if ! command -v g++-15 > /dev/null || [ "$(command -v g++-15)" = "$PTO_WSP_TOOLS_DIR/g++-15" ]; then
    printf '#!/bin/sh\nexec g++ "$@"\n' > "$PTO_WSP_TOOLS_DIR/g++-15"
    chmod +x "$PTO_WSP_TOOLS_DIR/g++-15"
    echo "g++-15 wrapper in $PTO_WSP_TOOLS_DIR (runs $(command -v g++))"
fi
export PATH="$PTO_WSP_TOOLS_DIR:$PATH"

# 5. venv and install (a2a3sim runtimes only).
if [ ! -x "$SIMPLER_VENV/bin/python" ]; then
    python3 -m venv "$SIMPLER_VENV"
fi
py="$SIMPLER_VENV/bin/python"
# simpler's build calls `cmake` and `ninja` by name: the venv's own.
export PATH="$SIMPLER_VENV/bin:$PATH"
if [ -d "$SIMPLER_ROOT/build/lib/a2a3/sim" ] \
    && "$py" -c 'import simpler.worker, simpler_setup.kernel_compiler' 2> /dev/null; then
    echo "simpler already installed in $SIMPLER_VENV (remove $SIMPLER_ROOT/build/lib to rebuild)"
else
    "$py" -m pip install --quiet --upgrade pip
    "$py" -m pip install --quiet 'scikit-build-core>=0.10.0' 'nanobind>=2.0.0' 'cmake>=3.15' \
        'ninja>=1.11' numpy PyYAML cloudpickle pytest
    "$py" -m pip install --no-build-isolation \
        --config-settings=build.targets=build_package_a2a3sim -e "$SIMPLER_ROOT"
fi
if [ ! -d "$SIMPLER_ROOT/build/lib/a2a3/sim" ]; then
    "$py" "$SIMPLER_ROOT/simpler_setup/build_runtimes.py" --platforms a2a3sim
fi
"$py" -c 'import simpler.worker, simpler.task_interface, simpler_setup.kernel_compiler'
echo "simpler ready: venv $SIMPLER_VENV"
