#!/usr/bin/env python3
"""Median over processes for `pto-wsp bench` (or any command printing the same table each run).

Why: best-of-N within one process hides how much a figure moves from one process to the next
(allocator state, thread placement, the machine's load). This runs the command N times as
separate processes and prints its output once, each number that changed between processes
replaced by `median [min-max]` over the N runs; numbers equal in every run (task counts,
thread counts) are printed as they are. Lines whose shape differs between runs (timestamps,
verdicts that flipped) are printed from every run, marked.

    scripts/bench-median.py --runs 5 -- target/release/pto-wsp bench chain:100 --llama 1024

Only the standard library; exits with the first failing run's status.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

NUM = re.compile(r"^(-?[0-9][0-9,]*(?:\.[0-9]+)?)(x|%|\)|/ms)?$")


def number(tok):
    m = NUM.match(tok)
    if not m:
        return None
    return float(m.group(1).replace(",", "")), m.group(2) or ""


def fmt(v, like):
    decimals = len(like.split(".")[1]) if "." in like else 0
    return f"{v:.{decimals}f}"


def merge_line(lines):
    toks = [l.split() for l in lines]
    if any(len(t) != len(toks[0]) for t in toks):
        return None
    out = []
    for col in zip(*toks):
        nums = [number(t) for t in col]
        if all(t == col[0] for t in col):
            out.append(col[0])
        elif all(n is not None for n in nums) and len({n[1] for n in nums}) == 1:
            vals = [n[0] for n in nums]
            base = nums[0][1]
            raw = col[0][: len(col[0]) - len(base)] if base else col[0]
            med = statistics.median(vals)
            out.append(
                f"{fmt(med, raw)}{base}[{fmt(min(vals), raw)}-{fmt(max(vals), raw)}]"
            )
        else:
            return None
    return " ".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="processes (default 5)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd or a.runs < 1:
        ap.error("give --runs N >= 1 and a command after --")
    outputs = []
    for i in range(a.runs):
        load = os.getloadavg()[0]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.stdout.write(p.stdout)
            sys.stderr.write(f"bench-median: run {i + 1} failed with status {p.returncode}\n")
            return p.returncode
        outputs.append(p.stdout.splitlines())
        print(f"# run {i + 1}/{a.runs}: load average {load:.2f} at start", file=sys.stderr)
    print(f"# median [min-max] over {a.runs} processes: {' '.join(cmd)}")
    n = max(len(o) for o in outputs)
    for k in range(n):
        lines = [o[k] if k < len(o) else "" for o in outputs]
        merged = merge_line(lines)
        if merged is None:
            for i, l in enumerate(lines):
                print(f"[run {i + 1}] {l}")
        else:
            # Keep the first run's indentation.
            indent = len(lines[0]) - len(lines[0].lstrip())
            print(" " * indent + merged)
    return 0


if __name__ == "__main__":
    sys.exit(main())
