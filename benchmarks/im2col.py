"""The im2col copy of this tree against another revision's, on the zoo's layers whose im2col is
not a shifted copy of the plane (strided, unpadded or narrower outputs: ResNet's 3x3/2 layers,
LeNet's and SimpleCNN's, AlexNet's and GoogLeNet's stems), batch 1, one thread.

Both versions of kernels/cpu/conv/im2col.py are called directly in one process (REV's imported from
``git show`` as a module of its own), interleaved with the order turned every call, on the same
image, filling the whole (C*KH*KW, OH*OW) matrix; outputs are checked equal. This tree's copy is
the one the im2col_gemm kernel makes: through the tap table where ``gathers_columns`` says so
(REV's ``im2col_range`` where REV has no tap table). Layers the direct kernels take (direct_gemm,
direct_rows) are timed on the copy they make instead, at any stride: the phase-split frame
(conv_direct.fill_frame), REV's against this tree's. Writes the table into docs/conv-gap.md
between the markers ``--mark`` names.

    .venv/bin/python benchmarks/im2col.py --against e02f3dc --repeats 40
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
from conv_gap import _input, _load, conv_layers
from revisions import import_source, source_at
from sections import replace_section

from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import build_model
from edgecnn.kernels.cpu.conv.direct import fill_frame, frame_shape
from edgecnn.kernels.cpu.conv.im2col import gather_rows, gathers_columns, im2col_range, tap_table
from edgecnn.kernels.cpu.conv.setup import ConvSetup, conv_setup
from edgecnn.kernels.cpu.gemm.microkernel import COLUMNS, ROWS

DOC = Path(__file__).parent.parent / "docs" / "conv-gap.md"
FRAME_RUNS = {"direct_gemm": COLUMNS, "direct_rows": ROWS}  # kernels that copy a frame: pixels per run


def copies_rows(s: ConvSetup) -> bool:
    """Whether the layer's im2col takes the per-output-row path (not the shifted-plane copy, not 1x1)."""
    shifted = s.strides == (1, 1) and s.out[1] == s.width
    return s.kernel != (1, 1) and not shifted and not s.depthwise


def interleaved(
    copies: dict[str, Callable[[], object]], outs: dict[str, np.ndarray], repeats: int
) -> tuple[float, float]:
    """Median ms of the "before" and "after" copies, called alternately; their outputs checked equal."""
    times: dict[str, list[float]] = {k: [] for k in copies}
    for repeat in range(repeats + 1):
        for name in list(copies) if repeat % 2 else list(copies)[::-1]:
            start = time.perf_counter()
            copies[name]()
            if repeat:  # the first round compiles and warms up
                times[name].append((time.perf_counter() - start) * 1e3)
    np.testing.assert_array_equal(outs["after"], outs["before"])
    return float(np.median(times["before"])), float(np.median(times["after"]))


def time_unfold(old: ModuleType, s: ConvSetup, repeats: int) -> tuple[float, float]:
    """REV's and this tree's im2col of one image's first group, the whole matrix."""
    channels = s.in_channels // s.group
    image = np.random.default_rng(0).standard_normal((channels, s.height, s.width)).astype(np.float32)
    pixels = s.out[0] * s.out[1]
    outs = {
        k: np.empty((channels * s.kernel[0] * s.kernel[1], pixels), np.float32) for k in ("before", "after")
    }
    arguments = (*s.window, s.out[1], 0, pixels)
    copies = {"before": lambda: old.im2col_range(image, *arguments, outs["before"])}
    if gathers_columns(s.width, s.strides, s.out):
        taps = tap_table(s.height, s.width, s.kernel, s.strides, s.pads[:2], s.dilations, s.out)
        copies["after"] = lambda: gather_rows(image, taps, 0, len(outs["after"]), 0, pixels, outs["after"])
        if hasattr(old, "gather_rows"):  # REV gathers too: its own tap table and loop
            copies["before"] = lambda: old.gather_rows(
                image, taps, 0, len(outs["before"]), 0, pixels, outs["before"]
            )
    else:
        copies["after"] = lambda: im2col_range(image, *arguments, outs["after"])
    return interleaved(copies, outs, repeats)


def time_frame(old: ModuleType, s: ConvSetup, run: int, repeats: int) -> tuple[float, float]:
    """REV's and this tree's phase-split frame of one image (what the direct kernels copy), its rows
    padded for output runs of ``run`` pixels."""
    x = np.random.default_rng(0).standard_normal((1, s.in_channels, s.height, s.width)).astype(np.float32)
    rows, phases, columns = frame_shape(s, run)
    shape = (s.in_channels * rows, phases, columns)
    outs = {k: np.empty(shape, np.float32) for k in ("before", "after")}
    copies = {
        "before": lambda: old.fill_frame(x, s.pads[0], s.pads[1], 0, shape[0], outs["before"]),
        "after": lambda: fill_frame(x, s.pads[0], s.pads[1], 0, shape[0], outs["after"]),
    }
    return interleaved(copies, outs, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", required=True)
    parser.add_argument("--models", default="resnet18,resnet50,simplecnn,lenet5,alexnet,googlenet")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--output", type=Path, default=DOC)
    parser.add_argument("--mark", default="conv-gap:im2col", help="the section of --output to rewrite")
    args = parser.parse_args()
    folder = Path(tempfile.gettempdir()) / "edgecnn-revisions"
    old_unfold = import_source(
        f"im2col_{args.against}", source_at(args.against, "src/edgecnn/kernels/cpu/conv/im2col.py"), folder
    )
    old_frame = import_source(
        f"conv_direct_{args.against}",
        source_at(args.against, "src/edgecnn/kernels/cpu/conv/direct.py"),
        folder,
    )
    load = os.getloadavg()[0]
    rows, seen = [], set()
    for model_name in args.models.split(","):
        model = build_model(model_name)
        _, x = _input(model)
        for node, types, _, chosen in conv_layers(_load(model, 1), x):
            s = conv_setup(node, types)
            if (
                s is None
                or not (copies_rows(s) or chosen in FRAME_RUNS)
                or (s.window, s.in_channels, s.height, s.width) in seen
            ):
                continue
            seen.add((s.window, s.in_channels, s.height, s.width))
            if chosen in FRAME_RUNS:
                before, after = time_frame(old_frame, s, FRAME_RUNS[chosen], args.repeats)
            else:
                before, after = time_unfold(old_unfold, s, args.repeats)
            shape = (
                f"{s.in_channels // s.group} @ {s.height}x{s.width}, {s.kernel[0]}x{s.kernel[1]}/{s.strides[0]} "
                f"-> {s.out[0]}x{s.out[1]}"
            )
            rows.append(
                f"| {model_name} | {shape} | {chosen} | {before:.3f} | {after:.3f} | {after / before:.2f} |"
            )
            print(rows[-1], flush=True)
    lines = [
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; one thread, the whole matrix of one image and group "
        "(direct_gemm, direct_rows: the whole frame of one image), medians "
        f"of {args.repeats} interleaved calls.",
        "",
        f"Command: `.venv/bin/python benchmarks/im2col.py --against {args.against} --models {args.models} "
        f"--repeats {args.repeats} --mark {args.mark}`",
        "",
        f"| model | channels @ input, filter/stride -> output | layer's kernel | {args.against} ms | this tree ms | ratio |",
        "|---|---|---|---:|---:|---:|",
        *rows,
    ]
    args.output.write_text(replace_section(args.output.read_text(), args.mark, lines))


if __name__ == "__main__":
    main()
