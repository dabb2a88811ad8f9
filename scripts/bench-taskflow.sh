#!/usr/bin/env bash
# Taskflow's build+run of `pto-wsp bench`'s five shapes, alternated with `pto-wsp bench` in the
# same minutes (docs/BENCHMARKS.md, "Side by side with Taskflow"). Needs a Taskflow checkout
# (header-only) at TASKFLOW_ROOT (default $HOME/.cache/pto-wsp/taskflow) and g++ with C++20;
# prints one `skipped: ...` line when either is missing.
#
# Usage: scripts/bench-taskflow.sh [PROCESSES] [PTO_WSP_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="${TASKFLOW_ROOT:-$HOME/.cache/pto-wsp/taskflow}"
processes="${1:-5}"
pto="${2:-$here/../target/release/pto-wsp}"
if [[ ! -f "$root/taskflow/taskflow.hpp" ]]; then
  echo "skipped: no Taskflow checkout at $root (set TASKFLOW_ROOT)"
  exit 0
fi
if ! command -v g++ >/dev/null; then
  echo "skipped: g++ not found"
  exit 0
fi
out="$(mktemp -d)"
g++ -O3 -march=native -std=c++20 -pthread -DNDEBUG -I"$root" "$here/taskflow-shapes.cpp" \
  -o "$out/taskflow-shapes"
for p in $(seq "$processes"); do
  echo "== process $p"
  for t in 1 2; do
    "$out/taskflow-shapes" "$t" 5 chain tree independent wavefront random
  done
  "$pto" bench --threads 1,2 --repeat 5 --llama 0 --no-kernels --no-main-job --devgen 0
done
