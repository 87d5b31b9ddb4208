"""The int8 micro-kernel's depth loops without VNNI (issue 37's AVX2 path), alone, on data in L1.

In a child process whose numba compiles for an AVX2-only CPU (NUMBA_CPU_NAME=haswell, this host's
features less AVX-512, VNNI and AMX, a numba cache of its own), one thread, process CPU time,
interleaved rounds, medians, as GMAC/s of the exact products each loop delivers:

- ``s16``: dot_s16, int16 units (`vpmaddwd`), exact for any weights;
- ``u8s8``: dot_u8s8 on weights that need no fix-up (`vpmaddubsw` + `vpmaddwd`): its ceiling;
- ``u8s8 + fix-ups x%``: dot_u8s8 with a fix-up in x% of the groups (split_pairs / fix_ups), the
  shares ResNet layers have;
- ``split activations``: the other exact scheme, a = (a & 127) + (a & 128), two `vpmaddubsw` and
  two `vpmaddwd` per group (this script's own kernel: the package does not have it).

    .venv/bin/python lab/int8_avx2_loops.py [--rounds 9] [--groups 144]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from common import machine_line

FIX_SHARES = (0.06, 0.12, 0.25)
"""Shares of fix-up groups timed (ResNet-18/50 layers: 5 to 50%, most 3x3 ones 5 to 16%)."""


def avx2_env() -> dict[str, str]:
    """The environment of a child whose numba compiles for an AVX2-only CPU like this one."""
    from numba.core.codegen import get_host_cpu_features

    off = ("+avx512", "+avxvnni", "+amx")
    features = ",".join(
        "-" + f[1:] if f.startswith(off) else f for f in get_host_cpu_features().split(",") if f
    )
    cache = Path(tempfile.gettempdir()) / "edgecnn-lab-numba-avx2-loops"
    return {
        **os.environ,
        "NUMBA_CPU_NAME": "haswell",
        "NUMBA_CPU_FEATURES": features,
        "NUMBA_CACHE_DIR": str(cache),
    }


def split_activations_kernel() -> Callable[..., None]:
    """dot_u8s8's block (4 x 2 vectors, no narrowing) with the activations split instead of the
    weights: exact, two `vpmaddubsw` and two `vpmaddwd` a group."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils

    from edgecnn.kernels.cpu.gemm.microkernel import _intrinsic
    from edgecnn.kernels.cpu.int8.dot_kernel import LANES, PMADDUBSW, PMADDWD, ROWS, VECTORS, _x86

    def codegen(context: Any, builder: Any, sig: Any, args: Sequence[Any]) -> Any:
        groups_v, a_v, b_v, rows_v, c_v = args
        index = ir.IntType(64)
        sums_type = ir.VectorType(ir.IntType(32), LANES)
        shorts, octets = ir.VectorType(ir.IntType(16), 2 * LANES), ir.VectorType(ir.IntType(8), 4 * LANES)
        a_ptr, b_ptr, rows_ptr, c_ptr = (
            context.make_array(sig.args[i])(context, builder, v).data
            for i, v in ((1, a_v), (2, b_v), (3, rows_v), (4, c_v))
        )
        zero = ir.Constant(sums_type, None)
        ones = ir.Constant(shorts, [1] * (2 * LANES))
        low, high = ir.Constant(octets, [0x7F] * (4 * LANES)), ir.Constant(octets, [0x80] * (4 * LANES))
        sums = [[cgutils.alloca_once_value(builder, zero) for _ in range(VECTORS)] for _ in range(ROWS)]
        with cgutils.for_range(builder, groups_v) as loop:
            row = builder.load(builder.gep(rows_ptr, [loop.index]))
            parts = []
            for v in range(VECTORS):
                at = builder.gep(b_ptr, [builder.add(row, ir.Constant(index, 4 * LANES * v))])
                x = builder.load(builder.bitcast(at, octets.as_pointer()), align=1)
                parts.append((builder.and_(x, low), builder.and_(x, high)))
            for r in range(ROWS):
                at = builder.add(builder.mul(loop.index, ir.Constant(index, ROWS)), ir.Constant(index, r))
                single = builder.insert_element(
                    zero, builder.load(builder.gep(a_ptr, [at])), ir.Constant(index, 0)
                )
                w = builder.bitcast(builder.shuffle_vector(single, single, zero), octets)
                for v, (lo, hi) in enumerate(parts):
                    total = builder.load(sums[r][v])
                    for half in (lo, hi):
                        pairs = _x86(builder, PMADDUBSW, shorts, half, w)
                        total = builder.add(total, _x86(builder, PMADDWD, sums_type, pairs, ones))
                    builder.store(total, sums[r][v])
        for r in range(ROWS):
            for v in range(VECTORS):
                at = builder.gep(c_ptr, [ir.Constant(index, (r * VECTORS + v) * LANES)])
                builder.store(builder.load(sums[r][v]), builder.bitcast(at, sums_type.as_pointer()), align=4)
        return context.get_dummy_value()

    @_intrinsic
    def split_block(typingctx: Any, groups: Any, a: Any, b: Any, rows: Any, c: Any) -> tuple[Any, Any]:
        return types.void(groups, a, b, rows, c), codegen

    return split_block


def measure(rounds: int, groups: int) -> None:
    """The table, in the AVX2 child."""
    import numba

    from edgecnn.kernels.cpu.int8.dot_gemm import pack_weights
    from edgecnn.kernels.cpu.int8.dot_kernel import (
        COLUMNS,
        ROWS,
        UNIT_S16,
        UNIT_U8S8,
        VECTORS,
        VNNI,
        WIDE,
        dot_s16,
        dot_u8s8,
        fix_ups,
        split_pairs,
    )

    assert not VNNI and not WIDE, "the child still compiles for VNNI / AVX-512"
    split_block = split_activations_kernel()

    @numba.njit
    def u8s8(
        n: int, groups: int, a: Any, b: Any, rows: Any, c: Any, starts: Any, units: Any, taps: Any
    ) -> None:
        for _ in range(n):
            dot_u8s8(VECTORS, groups, a, 0, b, 0, rows, c, 0, COLUMNS, starts[1], units, taps, 0)

    @numba.njit
    def s16(n: int, groups: int, a: Any, b: Any, rows: Any, c: Any) -> None:
        for _ in range(n):
            dot_s16(VECTORS, groups, a, 0, b, 0, rows, c, 0, COLUMNS)

    @numba.njit
    def split(n: int, groups: int, a: Any, b: Any, rows: Any, c: Any) -> None:
        for _ in range(n):
            split_block(groups, a, b, rows, c)

    rng = np.random.default_rng(0)
    depth = groups * UNIT_U8S8
    x = rng.integers(0, 256, (depth, COLUMNS), dtype=np.uint8)
    c = np.zeros(ROWS * COLUMNS, np.int32)
    b8 = np.ascontiguousarray(x.reshape(groups, UNIT_U8S8, COLUMNS).transpose(0, 2, 1)).reshape(-1)
    b16 = np.ascontiguousarray(x.astype(np.int16).reshape(-1, UNIT_S16, COLUMNS).transpose(0, 2, 1))
    rows8 = np.arange(groups, dtype=np.int64) * 4 * COLUMNS
    rows16 = np.arange(2 * groups, dtype=np.int64) * 4 * COLUMNS
    small = rng.integers(-40, 41, (ROWS, depth)).astype(np.int8)  # no pair can saturate
    n = max(1, 20_000_000 // (ROWS * COLUMNS * depth))
    macs = n * ROWS * COLUMNS * depth
    runs: dict[str, Callable[[], None]] = {
        "s16": lambda: s16(
            n, 2 * groups, pack_weights(small, UNIT_S16), b16.view(np.uint8).reshape(-1), rows16, c
        ),
        "split activations": lambda: split(n, groups, pack_weights(small, UNIT_U8S8), b8, rows8, c),
    }
    for share in (0.0, *FIX_SHARES):
        w = small.copy()
        fixed = rng.choice(groups, round(share * groups), replace=False)
        w[0, fixed * UNIT_U8S8] = 127  # one saturating pair in each of these groups
        w[0, fixed * UNIT_U8S8 + 1] = 100
        main, fix = split_pairs(w)
        fixes = fix_ups(fix, ROWS, rows8)
        assert fixes.starts[1] == len(fixed)
        a = pack_weights(main, UNIT_U8S8)
        name = "u8s8" if share == 0 else f"u8s8 + fix-ups {100 * share:.0f}%"
        runs[name] = lambda a=a, fixes=fixes: u8s8(n, groups, a, b8, rows8, c, *fixes)
    for run in runs.values():
        run()  # compiled
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.process_time()
            run()
            times[name].append(time.process_time() - start)
    print(f"{machine_line(1)}; {groups} groups ({depth} steps), {ROWS} x {COLUMNS} block, {n} calls a round")
    print(f"| loop (median of {rounds}) | GMAC/s | vs s16 |")
    print("|---|---:|---:|")
    base = macs / float(np.median(times["s16"]))
    for name, values in times.items():
        rate = macs / float(np.median(values))
        print(f"| {name} | {rate / 1e9:.1f} | {rate / base:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--groups", type=int, default=144, help="depth groups of 4 steps (144: 3x3 x 64 channels)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        measure(args.rounds, args.groups)
        return
    command = [
        sys.executable,
        __file__,
        "--child",
        "--rounds",
        str(args.rounds),
        "--groups",
        str(args.groups),
    ]
    sys.exit(subprocess.run(command, env=avx2_env(), check=False).returncode)


if __name__ == "__main__":
    main()
