"""What encryption and signatures cost at load: a ResNet-50-sized .ecnn (the zoo's resnet50, seeded
random weights, about 98 MiB) saved plain, encrypted, signed, and both, then loaded.

Columns: ``load_ecnn`` (file -> Graph), ``edgecnn.load`` (-> Model: passes included), and
``edgecnn.load`` followed by a read of every weight page (what the first run pays for a memory-mapped
plain file, and has already paid for a decrypted one). Warm page cache; medians of interleaved
rounds. The plain rows show the default (the weights' CRC-32 checked below 256 MiB) and verify=False.

    .venv/bin/python lab/ecnn_protected_load.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import edgecnn
from common import interleaved, machine_line
from edgecnn.bench.zoo import default_cache_dir, model_path
from edgecnn.format import load_ecnn, save_ecnn
from edgecnn.format.keys import generate_model_key, generate_signing_key
from edgecnn.importers import load_graph
from edgecnn.ir.graph import Graph


def read_every_page(graph: Graph) -> int:
    """One byte of every 4 KiB of every weight: what a first run faults in."""
    return sum(
        int(np.asarray(a).reshape(-1).view(np.uint8)[::4096].sum()) for a in graph.initializers.values()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    graph = load_graph(model_path("resnet50", default_cache_dir()))
    key = generate_model_key()
    private_pem, public_pem = generate_signing_key()
    with tempfile.TemporaryDirectory(prefix="edgecnn-protected-") as folder:
        paths = {name: Path(folder) / f"{name}.ecnn" for name in ("plain", "encrypted", "signed", "both")}
        save_ecnn(graph, paths["plain"])
        save_ecnn(graph, paths["encrypted"], encrypt=key)
        save_ecnn(graph, paths["signed"], sign=private_pem)
        save_ecnn(graph, paths["both"], encrypt=key, sign=private_pem)
        cases: dict[str, tuple[Path, dict[str, object]]] = {
            "plain (default: CRC checked)": (paths["plain"], {}),
            "plain, verify=False": (paths["plain"], {"verify": False}),
            "encrypted": (paths["encrypted"], {"key": key}),
            "signed, signature checked": (paths["signed"], {"verify_signature": public_pem}),
            "encrypted + signed, both checked": (paths["both"], {"key": key, "verify_signature": public_pem}),
        }
        size = paths["plain"].stat().st_size
        columns: dict[str, Callable[[Path, dict[str, object]], Callable[[], object]]] = {
            "load_ecnn": lambda path, kw: lambda: load_ecnn(path, **kw),  # type: ignore[arg-type]
            "edgecnn.load": lambda path, kw: lambda: edgecnn.load(path, threads=1, **kw),  # type: ignore[arg-type]
            "edgecnn.load + every page": lambda path, kw: (
                lambda: read_every_page(
                    edgecnn.load(path, threads=1, **kw).graph  # type: ignore[arg-type]
                )
            ),
        }
        timers = {
            (case, column): make(path, kwargs)
            for case, (path, kwargs) in cases.items()
            for column, make in columns.items()
        }
        medians = interleaved({f"{c}|{k}": t for (c, k), t in timers.items()}, args.rounds)
    print(f"`{' '.join(sys.argv)}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(machine_line())
    print(
        f"ResNet-50 .ecnn, {size / 2**20:.1f} MiB; medians of {args.rounds} interleaved rounds, warm page cache\n"
    )
    print("| file | " + " | ".join(f"{c} (ms)" for c in columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for case in cases:
        print(f"| {case} | " + " | ".join(f"{medians[f'{case}|{c}']:.0f}" for c in columns) + " |")
    base = "plain (default: CRC checked)"
    for column in columns:
        ratio = medians[f"encrypted|{column}"] / medians[f"{base}|{column}"]
        print(f"encrypted / plain default, {column}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
