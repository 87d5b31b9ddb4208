"""What checking the weights' CRC-32 at load costs per MB, to choose the size below which
``load_ecnn``'s default (verify=None) does it: one raw tensor of 16, 64 and 256 MiB, loaded with
verify=False, with the default check forced on, and with verify=True (every CRC and the SHA-256),
warm (file in the page cache) and cold (pages dropped first, as after a reboot).

    .venv/bin/python lab/ecnn_verify_cost.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from common import machine_line
from ecnn_load import median_ms
from edgecnn.format import load_ecnn, reader, save_ecnn
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops.registry import NoAttrs

SIZES_MIB = (16, 64, 256)


def one_tensor(mib: int) -> Graph:
    count = mib << 18  # float32 elements in mib MiB
    weight = np.random.default_rng(0).standard_normal(count, dtype=np.float32)
    return Graph(
        [TensorSpec("x", "float32", (count,))],
        ["y"],
        [Node("Add", "add", ["x", "w"], ["y"], NoAttrs())],
        {"w": weight},
    )


def timed_load(path: Path, verify: bool | None, repeats: int, cold: list[Path] | None) -> float:
    return float(median_ms(lambda: load_ecnn(path, verify=verify), repeats, cold))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    reader.DEFAULT_VERIFY_MAX_BYTES = 1 << 62  # the default check on at every size
    print(machine_line())
    print(
        "| file | cache | verify=False (ms) | default CRC check (ms) | verify=True (ms) | CRC check per MiB (ms) |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="edgecnn-verify-") as folder:
        for mib in SIZES_MIB:
            path = Path(folder) / f"w{mib}.ecnn"
            save_ecnn(one_tensor(mib), path)
            for cache, cold in (("warm", None), ("cold", [path])):
                off, crc, full = (
                    timed_load(path, verify, args.repeats, cold) for verify in (False, None, True)
                )
                print(
                    f"| {mib} MiB | {cache} | {off:.1f} | {crc:.1f} | {full:.1f} | {(crc - off) / mib:.2f} |"
                )


if __name__ == "__main__":
    main()
