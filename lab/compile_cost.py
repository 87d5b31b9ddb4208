"""Cold compile cost per compiled entry point: process CPU time of every outermost numba compile
(helpers compiled inside an entry's compile count towards that entry), under a fresh cache dir.

    .venv/bin/python lab/compile_cost.py depthwise            # each depthwise path, one process each
    .venv/bin/python lab/compile_cost.py pytest -- ARGS...    # whatever ARGS' tests compile
    .venv/bin/python lab/compile_cost.py ab DIR [ROUNDS [LAYER]]  # speed: DIR's depthwise against this tree's

``depthwise`` runs every path of the depthwise step (3x3 same-plane, 3x3 phased stride 2, flat
stride 1 and 2, 5x5 and 7x7 banded, the row-by-row rest) in a process of its own with an empty
NUMBA_CACHE_DIR, as a model using only that path would, and prints what each first call compiled.
CPU time, not wall: compiles are single-threaded and the machine is shared.

``ab`` imports DIR's depthwise.py and depthwise_bands.py (an earlier version, copied there) beside
this tree's, and times each version's depthwise step on MobileNet/ShuffleNet/EfficientNet-like
layers (one per path) in one process, on one thread, calls interleaved, process CPU time: the
median per layer over ROUNDS rounds of 50 calls. This tree's pass is called as a model's step
calls it (chosen once by ``depthwise_pass``, read-only constants).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any

if "NUMBA_CACHE_DIR" not in os.environ:  # numba reads it on import
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="compile-cost-")

from numba.core import event
from pytest import hookimpl as pytest_hookimpl

PATHS: dict[str, tuple[int, int, int, int, int]] = {
    # name: (kernel, stride, pad, dilation, side)
    "same_3x3": (3, 1, 1, 1, 14),
    "flat_3x3_s1": (3, 1, 1, 1, 28),
    "phased_3x3_s2": (3, 2, 1, 1, 28),
    "flat_3x3_s2_dil": (3, 2, 2, 2, 14),
    "banded_5x5": (5, 1, 2, 1, 28),
    "banded_7x7_s2": (7, 2, 3, 1, 28),
    "rows_3x3_s3": (3, 3, 1, 1, 28),
    "rows_5x5_s3": (5, 3, 2, 1, 28),
}


class CompileClock(event.Listener):
    """CPU seconds of each outermost compile, by dispatcher name and signature."""

    def __init__(self) -> None:
        self.depth = 0
        self.started = 0.0
        self.cost: dict[str, float] = defaultdict(float)

    def on_start(self, ev: event.Event) -> None:
        if self.depth == 0:
            self.started = time.process_time()
        self.depth += 1

    def on_end(self, ev: event.Event) -> None:
        self.depth -= 1
        if self.depth == 0:
            data: Any = ev.data
            name = f"{data['dispatcher'].py_func.__module__}.{data['dispatcher'].py_func.__qualname__}"
            self.cost[f"{name}{data['args']}"] += time.process_time() - self.started

    def report(self) -> None:
        total = sum(self.cost.values())
        for key, seconds in sorted(self.cost.items(), key=lambda kv: -kv[1]):
            print(f"{seconds:8.1f} s  {key}")
        print(f"{total:8.1f} s  total, {len(self.cost)} compiles")


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (a test that runs the CLI)."""
    times = os.times()
    return time.process_time() + times.children_user + times.children_system


class TestClock:
    """pytest plugin: CPU seconds of each test (setup, call and teardown; child processes
    included), and how much of it went on numba compiles in this process."""

    def __init__(self, compiles: CompileClock) -> None:
        self.compiles = compiles
        self.cost: dict[str, tuple[float, float]] = {}

    @pytest_hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Any:
        cpu, compiled = cpu_seconds(), sum(self.compiles.cost.values())
        yield
        self.cost[item.nodeid] = (cpu_seconds() - cpu, sum(self.compiles.cost.values()) - compiled)

    def report(self, top: int = 25) -> None:
        print("CPU s  compile s  test")
        for nodeid, (cpu, compiled) in sorted(self.cost.items(), key=lambda kv: -kv[1][0])[:top]:
            print(f"{cpu:6.1f}  {compiled:9.1f}  {nodeid}")
        print(f"{sum(c for c, _ in self.cost.values()):6.1f}  total over {len(self.cost)} tests")


def run_path(name: str) -> None:
    """One depthwise path's first call, its compiles timed (runs in a fresh-cache child)."""
    import numpy as np

    from edgecnn.kernels.cpu.conv.depthwise import depthwise_conv_2d
    from edgecnn.kernels.cpu.conv.depthwise_bands import BAND_FLOATS

    kernel, stride, pad, dilation, side = PATHS[name]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, side, side), dtype=np.float32)
    w = rng.standard_normal((8, kernel, kernel), dtype=np.float32)
    b = rng.standard_normal(8, dtype=np.float32)
    out_side = (side + 2 * pad - (kernel - 1) * dilation - 1) // stride + 1
    out = np.empty((1, 8, out_side, out_side), dtype=np.float32)
    args = (
        x,
        w,
        b,
        True,
        stride,
        stride,
        pad,
        pad,
        dilation,
        dilation,
        3,
        0.0,
        0.0,
        6.0,
        BAND_FLOATS,
        2,
        out,
    )
    clock = CompileClock()
    with event.install_listener("numba:compile", clock):
        depthwise_conv_2d(*args)
    clock.report()


AB_LAYERS: dict[str, tuple[int, int, int, int]] = {
    # name: (channels, side, kernel, stride), padding kernel // 2, ReLU6
    "same_3x3 96x14x14": (96, 14, 3, 1),
    "same_3x3 160x7x7": (160, 7, 3, 1),
    "flat_3x3 144x56x56": (144, 56, 3, 1),
    "flat_3x3 192x28x28": (192, 28, 3, 1),
    "phased_3x3 96x112x112/2": (96, 112, 3, 2),
    "phased_3x3 144x28x28/2": (144, 28, 3, 2),
    "banded_5x5 240x14x14": (240, 14, 5, 1),
    "banded_5x5 144x28x28/2": (144, 28, 5, 2),
    "banded_7x7 96x56x56": (96, 56, 7, 1),
}


def load_version(folder: str, tag: str) -> Any:
    """DIR's depthwise.py as module ``tag``, importing DIR's depthwise_bands.py (as ``tag_bands``)."""
    import importlib.util

    def load(name: str, path: str, text: str) -> Any:
        spec = importlib.util.spec_from_loader(name, loader=None, origin=path)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        module.__file__ = path
        sys.modules[name] = module
        exec(compile(text, path, "exec"), module.__dict__)
        return module

    with open(os.path.join(folder, "depthwise_bands.py")) as f:
        load(f"{tag}_bands", os.path.join(folder, "depthwise_bands.py"), f.read())
    with open(os.path.join(folder, "depthwise.py")) as f:
        text = f.read().replace("edgecnn.kernels.cpu.conv.depthwise_bands", f"{tag}_bands")
    return load(tag, os.path.join(folder, "depthwise.py"), text)


def run_ab(folder: str, rounds: int, only: str) -> None:
    """Interleaved CPU-time A/B of DIR's depthwise step against this tree's (one thread)."""
    import functools
    import statistics

    import numpy as np

    from edgecnn.kernels.cpu import cpu_threads
    from edgecnn.kernels.cpu.conv import depthwise
    from edgecnn.kernels.cpu.conv.depthwise_bands import BAND_FLOATS

    old_kernel = load_version(folder, "depthwise_before").depthwise_conv_2d
    print(f"load average {os.getloadavg()[0]:.2f} at the start")
    print("| layer | before us | after us | after/before |")
    print("|---|---:|---:|---:|")
    rng = np.random.default_rng(0)
    for name, (channels, side, kernel, stride) in AB_LAYERS.items():
        if only not in name:
            continue
        pad = kernel // 2
        x = rng.standard_normal((1, channels, side, side), dtype=np.float32)
        w = rng.standard_normal((channels, kernel, kernel), dtype=np.float32)
        b = rng.standard_normal(channels, dtype=np.float32)
        out_side = (side + 2 * pad - kernel) // stride + 1
        # this tree's pass as a step calls it: chosen once, the constants read-only
        chosen = depthwise.depthwise_pass((kernel, kernel), (stride, stride), (pad,) * 4, (1, 1), out_side)
        versions = {
            "before": functools.partial(old_kernel, x, w, b),
            "after": functools.partial(chosen, x, depthwise.read_only(w), depthwise.read_only(b)),
        }
        outs = {v: np.empty((1, channels, out_side, out_side), dtype=np.float32) for v in versions}
        args = (True, stride, stride, pad, pad, 1, 1, 3, 0.0, 0.0, 6.0, BAND_FLOATS, 1)
        samples: dict[str, list[float]] = {v: [] for v in versions}
        with cpu_threads(1):
            for v, fn in versions.items():
                fn(*args, outs[v])
            np.testing.assert_array_equal(outs["before"], outs["after"])
            for _ in range(rounds):
                for v, fn in versions.items():
                    start = time.process_time()
                    for _ in range(50):
                        fn(*args, outs[v])
                    samples[v].append((time.process_time() - start) / 50 * 1e6)
        before, after = statistics.median(samples["before"]), statistics.median(samples["after"])
        print(f"| {name} | {before:.1f} | {after:.1f} | {after / before:.3f} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


def main(argv: list[str]) -> int:
    if argv[:1] == ["ab"]:
        run_ab(argv[1], int(argv[2]) if len(argv) > 2 else 15, argv[3] if len(argv) > 3 else "")
        return 0
    if argv[:1] == ["path"]:
        run_path(argv[1])
        return 0
    if argv[:1] == ["depthwise"]:
        for name in PATHS:
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "NUMBA_CACHE_DIR": cache}
                print(f"== {name}", flush=True)
                subprocess.run([sys.executable, __file__, "path", name], env=env, check=True)
        return 0
    if argv[:1] == ["pytest"]:
        import pytest

        clock = CompileClock()
        tests = TestClock(clock)
        with event.install_listener("numba:compile", clock):
            code = pytest.main(argv[2:] if argv[1:2] == ["--"] else argv[1:], plugins=[tests])
        clock.report()
        tests.report()
        return int(code)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
