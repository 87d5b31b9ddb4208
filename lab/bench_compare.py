"""Side by side: `edgecnn bench --json` runs of two trees (or the same tree twice), per model and batch.

For each case it prints edgecnn's median divided by onnxruntime's median *in the same run* (the
ratio the bench reports), for every run given, and the change of that ratio between the first
"before" run and each "after" run. Comparing ratios rather than milliseconds cancels most of a
shared machine's drift, since both engines ran interleaved in one process. Two runs of the same tree
(``--before a.json b.json``) give the noise: the spread of the ratio between them.

    python lab/bench_compare.py --before base1.json base2.json --after new.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def ratios(path: Path) -> dict[tuple[str, int], float]:
    """(model, batch) -> edgecnn median / onnxruntime median of one bench run."""
    results = json.loads(path.read_text(encoding="utf-8"))["results"]
    medians = {(r["model"], r["batch"], r["engine"]): r["median_ms"] for r in results if not r.get("error")}
    out = {}
    for (model, batch, engine), median in medians.items():
        peer = medians.get((model, batch, "onnxruntime"))
        if engine == "edgecnn" and peer:
            out[(model, batch)] = median / peer
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", type=Path, nargs="+", required=True, help="bench JSON of the old tree")
    parser.add_argument("--after", type=Path, nargs="+", required=True, help="bench JSON of the new tree")
    args = parser.parse_args()
    before = [ratios(p) for p in args.before]
    after = [ratios(p) for p in args.after]
    cases = sorted(set().union(*before, *after), key=lambda c: (c[1], c[0]))
    head = [f"before{i + 1}" for i in range(len(before))] + [f"after{i + 1}" for i in range(len(after))]
    print("| model | batch | " + " | ".join(head) + " | noise (before spread) | after / before1 |")
    print("|---|---:|" + "---:|" * (len(head) + 2))
    noises, changes = [], []
    for case in cases:
        values = [r.get(case) for r in (*before, *after)]
        shown = " | ".join("-" if v is None else f"{v:.2f}" for v in values)
        known = [r[case] for r in before if case in r]
        noise = (max(known) / min(known) - 1) if len(known) > 1 else None
        change = [r[case] / before[0][case] for r in after if case in r and case in before[0]]
        if noise is not None:
            noises.append(noise)
        changes.extend(change)
        noise_text = "-" if noise is None else f"{noise:.0%}"
        change_text = ", ".join(f"{c:.2f}x" for c in change) or "-"
        print(f"| {case[0]} | {case[1]} | {shown} | {noise_text} | {change_text} |")
    if changes:
        geo = statistics.geometric_mean(changes)
        print(f"\ngeometric mean of after / before1: {geo:.3f}x over {len(changes)} cases")
    if noises:
        print(
            f"median noise between the before runs: {statistics.median(noises):.0%}, largest {max(noises):.0%}"
        )


if __name__ == "__main__":
    main()
