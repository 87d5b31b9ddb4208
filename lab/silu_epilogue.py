"""The convolution epilogue's Sigmoid/SiLU with the C library's exp per element (the code before
kernels/cpu/fastmath.py) against the vectorised one now in tiled_gemm.rows_epilogue, in one process
on one thread, interleaved, in process CPU time (issue 36).

    .venv/bin/python lab/silu_epilogue.py --rounds 9
"""

from __future__ import annotations

import argparse
import statistics
import time

import numba
import numpy as np

from common import machine_line
from edgecnn.kernels.cpu.conv.tiled_gemm import rows_epilogue
from edgecnn.kernels.cpu.gemm.epilogue import ActivationKind


@numba.njit(cache=False)
def libm_rows(block: np.ndarray, bias: np.ndarray, silu: bool) -> None:
    """The previous epilogue's loop: bias, then 1 / (1 + np.exp(-|x|)) element by element."""
    one, zero = np.float32(1.0), np.float32(0.0)
    for r in range(block.shape[0]):
        row = block[r]
        b = bias[r]
        for p in range(row.shape[0]):
            x = row[p] + b
            e = np.exp(-abs(x))
            q = one / (one + e)
            s = q if x >= zero else e * q
            row[p] = x * s if silu else s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--shapes", default="96x12544,240x784,1152x49", help="channels x pixels, ...")
    args = parser.parse_args()
    numba.set_num_threads(1)
    print(machine_line(1))
    print("| block | kind | libm exp (ms CPU) | fastmath (ms CPU) | ratio |\n|---|---|---:|---:|---:|")
    rng = np.random.default_rng(0)
    for shape in args.shapes.split(","):
        channels, pixels = (int(v) for v in shape.split("x"))
        source = (rng.standard_normal((channels, pixels)) * 4).astype(np.float32)
        bias = rng.standard_normal(channels).astype(np.float32)
        for kind in (ActivationKind.SIGMOID, ActivationKind.SILU):
            old, new = source.copy(), source.copy()
            libm_rows(old, bias, kind == ActivationKind.SILU)
            rows_epilogue(new, 0, channels, 0, pixels, bias, True, int(kind), 0.0, 0.0, 0.0)
            np.testing.assert_allclose(new, old, rtol=1e-6, atol=1e-30)
            times: dict[str, list[float]] = {"old": [], "new": []}
            for _ in range(args.rounds):
                for label in ("old", "new"):
                    block = source.copy()
                    start = time.process_time()
                    for _ in range(5):
                        if label == "old":
                            libm_rows(block, bias, kind == ActivationKind.SILU)
                        else:
                            rows_epilogue(block, 0, channels, 0, pixels, bias, True, int(kind), 0.0, 0.0, 0.0)
                    times[label].append((time.process_time() - start) / 5 * 1e3)
            a, b = statistics.median(times["old"]), statistics.median(times["new"])
            print(f"| {shape} | {kind.name} | {a:.3f} | {b:.3f} | {b / a:.2f} |")
    print(machine_line(1))


if __name__ == "__main__":
    main()
