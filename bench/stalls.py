#!/usr/bin/env python3
"""Where a kernel's warps wait: a summary of Nsight Compute's per-instruction stall samples.

`ncu` samples each warp's state at a fixed interval. With the `SourceCounters` section, the
report's source page holds, for every SASS instruction, how many samples found a warp stopped
there and why (`stall_long_sb`: waiting for a global-memory load; `stall_barrier`: at
`bar.sync`; `stall_wait`: a fixed-latency dependency; `stall_math`: a math pipe full; ...).
This script reads that page as CSV and prints the totals by reason, the opcodes that hold the
most samples of each leading reason, and the instructions with the most samples.

    ncu --kernel-name regex:KERNEL --launch-count 1 --section SourceCounters -o REPORT PROGRAM
    ncu -i REPORT.ncu-rep --page source --csv --print-source sass > SOURCE.csv
    python3 bench/stalls.py SOURCE.csv [--top N]

(`bash bench/gpu-check.sh stalls ...` runs all three on the GPU machine.) The CSV may be
xz-compressed (`SOURCE.csv.xz`).
"""

import argparse
import collections
import csv
import lzma
import re
import sys

ALL_SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def read_rows(path):
    """The header and the instruction rows of the source page's CSV."""
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    for i, row in enumerate(rows):
        if "Address" in row and ALL_SAMPLES in row:
            return row, rows[i + 1:]
    sys.exit(f"{path}: no '{ALL_SAMPLES}' column; was the report made with SourceCounters?")


def number(text):
    return float(text) if text else 0.0


def opcode(source):
    """`FFMA` of `@!P0 FFMA R1, R2, R3, R4`: the opcode without its predicate."""
    return re.sub(r"^@!?U?P\w+\s+", "", source.strip()).split(" ")[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", help="ncu --page source --csv --print-source sass output")
    parser.add_argument("--top", type=int, default=12, help="instructions listed (default 12)")
    args = parser.parse_args()
    header, rows = read_rows(args.csv)
    col = {name: i for i, name in enumerate(header)}
    reasons = [n for n in header if n.startswith("stall_") and "Not Issued" not in n]
    total = sum(number(r[col[ALL_SAMPLES]]) for r in rows)
    if total == 0:
        sys.exit(f"{args.csv}: no samples")
    by_reason = {n: sum(number(r[col[n]]) for r in rows) for n in reasons}
    print(f"{len(rows)} instructions, {total:.0f} samples")
    print("samples by reason:")
    leading = sorted(by_reason, key=by_reason.get, reverse=True)
    for name in leading:
        if by_reason[name] > 0:
            print(f"  {name:28} {by_reason[name]:10.0f} {100 * by_reason[name] / total:5.1f} %")
    print("opcodes holding each leading reason's samples:")
    for name in leading[:5]:
        held = collections.Counter()
        for r in rows:
            held[opcode(r[col["Source"]])] += number(r[col[name]])
        top = ", ".join(f"{op} {100 * v / by_reason[name]:.0f} %" for op, v in held.most_common(4))
        print(f"  {name:28} {top}")
    if EXECUTED in col:
        mix = collections.Counter()
        for r in rows:
            mix[opcode(r[col["Source"]]).split(".")[0]] += number(r[col[EXECUTED]])
        executed = sum(mix.values())
        top = ", ".join(f"{op} {100 * v / executed:.1f} %" for op, v in mix.most_common(8))
        print(f"warp instructions executed: {executed:.0f} ({top})")
    print(f"the {args.top} instructions with the most samples:")
    for r in sorted(rows, key=lambda r: -number(r[col[ALL_SAMPLES]]))[: args.top]:
        samples = number(r[col[ALL_SAMPLES]])
        why = max(reasons, key=lambda n: number(r[col[n]]))
        print(f"  {100 * samples / total:5.1f} %  {why:20} {r[col['Source']].strip()[:64]}")


if __name__ == "__main__":
    main()
