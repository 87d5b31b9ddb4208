"""The float micro-kernel's rate with its operands in cache, at 1 and 2 threads (issue 36).

Packs a (M x K) weight block and a (K x N) panel set once, then runs ``packed_gemm.gemm_panels``
over them in a compiled loop: no im2col, no packing, no epilogue beyond the store, so the figure is
what the register block itself sustains on this CPU, the ceiling a convolution kernel built on it
can approach. Two threads run one copy each (separate outputs, shared read-only operands).

    .venv/bin/python lab/microkernel_rate.py [--m 128 --k 256 --n 256 --calls 2000 --repeats 5]
"""

from __future__ import annotations

import argparse
from functools import partial

import numba
import numpy as np

from common import machine_line, timed
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS, ROWS
from edgecnn.kernels.cpu.gemm.packed_gemm import gemm_panels, pack_panels, pack_weights


@numba.njit(parallel=True, cache=False)
def _repeat(calls, copies, packed, blocks, depth, rows, panels, width, out):  # type: ignore[no-untyped-def]
    for copy in numba.prange(copies):
        for _ in range(calls):
            gemm_panels(packed, blocks, 0, depth, 0, rows, panels, width, out[copy], 0, width, False)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--m", type=int, default=128)
    parser.add_argument("--k", type=int, default=256, help="depth: at most packed_gemm.DEPTH_BLOCK")
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    m, k, n = args.m, args.k, args.n
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    packed = pack_weights(weights)
    panels = np.zeros(k * (-(-n // COLUMNS) * COLUMNS), np.float32)
    pack_panels(b.reshape(-1), 0, n, k, n, panels)
    blocks = -(-m // ROWS)
    print(f"block {ROWS} x {COLUMNS}; M {m}, K {k}, N {n}; {machine_line()}")
    for copies in (1, 2):
        numba.set_num_threads(copies)
        out = np.zeros((copies, m * n), np.float32)
        _repeat(1, copies, packed, blocks, k, m, panels, n, out)
        np.testing.assert_allclose(out[0].reshape(m, n), weights @ b, rtol=1e-3, atol=1e-3)
        times = timed(
            partial(_repeat, args.calls, copies, packed, blocks, k, m, panels, n, out), 0, args.repeats
        )
        rates = [2 * m * k * n * args.calls * copies / (ms * 1e-3) / 1e9 for ms in times]
        print(
            f"{copies} thread(s): median {np.median(rates):.1f} GFLOP/s (repeats {', '.join(f'{r:.1f}' for r in rates)})"
        )


if __name__ == "__main__":
    main()
