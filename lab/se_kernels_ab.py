"""The SiLU/Sigmoid loops, the squeeze-and-excitation gate Mul and the global average pool at
another git revision against this tree's, in process CPU time on one thread (issue 36).

Compiled kernels inline the exponential, so two revisions cannot share a process: child processes
alternate, each importing ``src`` of one version (REV's from ``git archive``) and timing every case
(median of interleaved rounds, several calls per round, process CPU time). The table gives the
median over the processes of each version, in nanoseconds per element.

    .venv/bin/python lab/se_kernels_ab.py --before HEAD --processes 3 --rounds 15
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from common import machine_line, package_sources, run_child

SILU_BLOCKS = ((96, 12544), (240, 784), (1152, 49))
"""(channels, pixels) of EfficientNet-B0's SiLU convolutions: 112x112, 28x28 and 7x7 maps."""
SE_MAPS = ((32, 112, 112), (144, 28, 28), (672, 14, 14), (1152, 7, 7))
"""(channels, height, width) of EfficientNet-B0's gate Muls and global pools."""


def cases() -> dict[str, tuple[Callable[[], object], int]]:
    """{case: (one call, elements it touches)} with the package this process imports."""
    from edgecnn.kernels.cpu.binary import OPS, binary_rows_serial, collapse
    from edgecnn.kernels.cpu.conv.tiled_gemm import rows_epilogue
    from edgecnn.kernels.cpu.eltwise import activation
    from edgecnn.kernels.cpu.gemm.epilogue import ActivationKind
    from edgecnn.kernels.cpu.pool.loops import global_pool_serial

    rng = np.random.default_rng(0)
    found: dict[str, tuple[Callable[[], object], int]] = {}
    for channels, pixels in SILU_BLOCKS:
        block = (rng.standard_normal((channels, pixels)) * 4).astype(np.float32)
        bias = np.zeros(channels, np.float32)
        for kind in (ActivationKind.SIGMOID, ActivationKind.SILU):

            def epilogue(
                block: np.ndarray = block, bias: np.ndarray = bias, kind: int = int(kind), n: int = pixels
            ) -> None:
                rows_epilogue(block, 0, block.shape[0], 0, n, bias, True, kind, 0.0, 0.0, 0.0)

            found[f"conv epilogue {kind.name} {channels}x{pixels}"] = (epilogue, block.size)
        flat = block.reshape(-1)
        out = np.empty_like(flat)
        sigmoid = int(ActivationKind.SIGMOID)

        def standalone(flat: np.ndarray = flat, out: np.ndarray = out, kind: int = sigmoid) -> None:
            activation(flat, kind, 0.0, 0.0, 0.0, flat.size, out)

        found[f"Sigmoid op, out of place {channels}x{pixels}"] = (standalone, flat.size)
    for c, h, w in SE_MAPS:
        x = rng.standard_normal((1, c, h, w)).astype(np.float32)
        s = rng.random((1, c, 1, 1)).astype(np.float32)
        layout = collapse(x.shape, x.shape, s.shape)
        assert layout is not None
        product = np.empty_like(x).reshape(-1)
        xf, sf = x.reshape(-1), s.reshape(-1)

        def gate(
            xf: np.ndarray = xf, sf: np.ndarray = sf, o: np.ndarray = product, la: tuple = layout
        ) -> None:
            binary_rows_serial(OPS["Mul"], xf, la[1], sf, la[2], o, la[0])

        found[f"gate Mul 1x{c}x{h}x{w}"] = (gate, x.size)
        planes = x.reshape(c, h * w)
        means = np.empty(c, np.float32)

        def pool(planes: np.ndarray = planes, means: np.ndarray = means) -> None:
            global_pool_serial(planes, False, means)

        found[f"global average pool 1x{c}x{h}x{w}"] = (pool, x.size)
    return found


def measure(rounds: int) -> dict[str, float]:
    """{case: median ns per element} in this process, one thread, process CPU time."""
    import numba

    numba.set_num_threads(1)
    found = cases()
    samples: dict[str, list[float]] = {name: [] for name in found}
    for fn, _ in found.values():
        fn()
    for _ in range(rounds):
        for name, (fn, size) in found.items():
            calls = max(1, 2_000_000 // size)
            start = time.process_time()
            for _ in range(calls):
                fn()
            samples[name].append((time.process_time() - start) / calls / size * 1e9)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="REV", required=True)
    parser.add_argument("--processes", type=int, default=3, help="child processes per version")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.rounds)))
        return
    print(machine_line(1))
    samples: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        sources = package_sources(args.before, Path(tmp))
        for _ in range(args.processes):
            for version, source in sources.items():
                command = [sys.executable, __file__, "--measure", "--before", args.before]
                command += ["--rounds", str(args.rounds)]
                samples[version].append(run_child(source, command))  # type: ignore[arg-type]
    print(f"\n| case | {args.before} ns/element | this tree | ratio |\n|---|---:|---:|---:|")
    for name in samples["after"][0]:
        before = statistics.median(run[name] for run in samples["before"])
        after = statistics.median(run[name] for run in samples["after"])
        print(f"| {name} | {before:.3f} | {after:.3f} | {after / before:.2f} |")
    print(machine_line(1))


if __name__ == "__main__":
    main()
