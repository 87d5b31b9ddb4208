"""The depthwise loop of this tree against another revision's, on the depthwise layers of
MobileNetV2 and ShuffleNetV2 (batch 1), with onnxruntime's time for the same layer beside them.

Both versions of kernels/cpu/conv/depthwise.py are called directly in one process (REV's imported from
``git show`` as a module of its own), interleaved with the order turned every call, on the same
inputs; outputs are checked equal. Writes the table into docs/tuning.md between its markers.

    .venv/bin/python benchmarks/depthwise.py --against 97cdc62 --threads 2 --repeats 60
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
from conv_gap import _input, _load, conv_layers, fused_names, ort_conv_time, ort_node_times
from revisions import import_source, source_at
from sections import replace_section

from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model
from edgecnn.kernels.cpu.conv.depthwise import depthwise_conv_2d
from edgecnn.kernels.cpu.conv.setup import ConvSetup, conv_setup
from edgecnn.kernels.cpu.system.threads import cpu_threads

DOC = Path(__file__).parent.parent / "docs" / "tuning.md"


def revision_module(revision: str) -> ModuleType:
    """kernels/cpu/conv/depthwise.py as it was at ``revision``, imported under a name of its own."""
    source = source_at(revision, "src/edgecnn/kernels/cpu/conv/depthwise.py")
    return import_source(f"depthwise_{revision}", source, Path(tempfile.gettempdir()) / "edgecnn-revisions")


def time_layer(
    old: Callable[..., None],
    s: ConvSetup,
    shape: tuple[int, ...],
    weight: np.ndarray,
    threads: int,
    repeats: int,
) -> tuple[float, float]:
    """Median ms of ``old`` and this tree's depthwise loop on one layer (ReLU fused), interleaved."""
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    w = np.ascontiguousarray(weight.reshape(s.out_channels, *s.kernel), dtype=np.float32)
    b = np.zeros(s.out_channels, np.float32)
    kernels = {"before": old, "after": depthwise_conv_2d}
    outs = {k: np.empty((s.batch, s.out_channels, *s.out), np.float32) for k in kernels}
    times: dict[str, list[float]] = {k: [] for k in kernels}
    with cpu_threads(threads):
        for repeat in range(repeats + 1):
            for name in list(kernels) if repeat % 2 else list(kernels)[::-1]:
                start = time.perf_counter()
                kernels[name](x, w, b, False, *s.strides, s.pads[0], s.pads[1], *s.dilations,
                              1, 0.0, 0.0, 0.0, threads, outs[name])  # fmt: skip
                if repeat:  # the first round compiles and warms up
                    times[name].append((time.perf_counter() - start) * 1e3)
    np.testing.assert_allclose(outs["after"], outs["before"], rtol=1e-5, atol=1e-5)
    return float(np.median(times["before"])), float(np.median(times["after"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", required=True)
    parser.add_argument("--models", default="mobilenetv2,shufflenetv2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--output", type=Path, default=DOC)
    args = parser.parse_args()
    old = revision_module(args.against).depthwise_conv_2d
    load = os.getloadavg()[0]
    rows = []
    for model_name in args.models.split(","):
        model = build_model(model_name)
        name, x = _input(model)
        ort_times = ort_node_times(model, name, x, args.threads, args.repeats)
        onnx_names = fused_names(model)
        seen = set()
        for node, types, values, chosen in conv_layers(_load(model, args.threads), x):
            s = conv_setup(node, types)
            key = (s.in_channels, s.height, s.width, s.strides, s.pads)
            if chosen != "depthwise" or key in seen:
                continue
            seen.add(key)
            before, after = time_layer(old, s, types[0].shape, values[1], args.threads, args.repeats)
            ort = ort_conv_time(onnx_names.get(node.name, [node.name]), ort_times)
            shape = f"{s.in_channels} @ {s.height}x{s.width}, {s.kernel[0]}x{s.kernel[1]}/{s.strides[0]}"
            rows.append(
                f"| {model_name} | {shape} | {before:.3f} | {after:.3f} | {after / before:.2f} | "
                f"{'-' if ort is None else f'{ort:.3f}'} |"
            )
            print(rows[-1], flush=True)
    lines = [
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; batch 1, {args.threads} thread(s), ReLU fused, medians of "
        f"{args.repeats} interleaved calls.",
        "",
        f"Command: `.venv/bin/python benchmarks/depthwise.py --against {args.against} --threads {args.threads} "
        f"--repeats {args.repeats}`",
        "",
        f"| model | channels @ input, filter/stride | {args.against} ms | this tree ms | ratio | onnxruntime ms |",
        "|---|---|---:|---:|---:|---:|",
        *rows,
    ]
    args.output.write_text(replace_section(args.output.read_text(), "tuning:depthwise", lines))


if __name__ == "__main__":
    main()
