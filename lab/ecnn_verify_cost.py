"""What checking the weights' CRC-32 at load costs per MB, to choose the size below which
``load_ecnn``'s default (verify=None) does it: one raw tensor of 16, 64 and 192 MiB (files under
the default's 256 MiB limit), loaded with verify=False, with the default check, and with
verify=True (every CRC and the SHA-256), warm (file in the page cache) and cold (pages dropped
first, as after a reboot).

    .venv/bin/python lab/ecnn_verify_cost.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common import drop_from_page_cache, machine_line, timed_ms
from edgecnn.format import load_ecnn, save_ecnn
from edgecnn.format.reader import DEFAULT_VERIFY_MAX_BYTES
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops.registry import NoAttrs

SIZES_MIB = (16, 64, 192)


def one_tensor(mib: int) -> Graph:
    count = mib << 18  # float32 elements in mib MiB
    weight = np.random.default_rng(0).standard_normal(count, dtype=np.float32)
    return Graph(
        [TensorSpec("x", "float32", (count,))],
        ["y"],
        [Node("Add", "add", ["x", "w"], ["y"], NoAttrs())],
        {"w": weight},
    )


def timed_load(path: Path, verify: bool | None, repeats: int, cold: bool) -> float:
    """Median ms of ``repeats`` loads, the file's pages dropped before each when ``cold``."""
    times = []
    for _ in range(repeats):
        gc.collect()  # closes the previous load's mapping so that its pages can be dropped
        if cold:
            drop_from_page_cache(path)
        times.append(timed_ms(lambda: load_ecnn(path, verify=verify)))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"`{' '.join(sys.argv)}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(machine_line())
    print(
        "| file | cache | verify=False (ms) | default CRC check (ms) | verify=True (ms) | CRC check per MiB (ms) |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="edgecnn-verify-") as folder:
        for mib in SIZES_MIB:
            path = Path(folder) / f"w{mib}.ecnn"
            save_ecnn(one_tensor(mib), path)
            assert path.stat().st_size <= DEFAULT_VERIFY_MAX_BYTES, "the default would not check this file"
            for cache, cold in (("warm", False), ("cold", True)):
                off, crc, full = (
                    timed_load(path, verify, args.repeats, cold) for verify in (False, None, True)
                )
                print(
                    f"| {mib} MiB | {cache} | {off:.1f} | {crc:.1f} | {full:.1f} | {(crc - off) / mib:.2f} |"
                )


if __name__ == "__main__":
    main()
