"""`edgecnn run`: classify images (or run saved arrays) and print the scores."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import typer

from edgecnn.cli.console import console, headline
from edgecnn.errors import InputError
from edgecnn.ir.graph import TensorSpec
from edgecnn.ops.activation import SoftmaxAttrs, softmax
from edgecnn.vision.preprocess import Preprocess, load_inputs, parse_floats, parse_size

if TYPE_CHECKING:
    from edgecnn.model import Model

NAME = "run"
SHOW_ALL_UP_TO = 10
"""Outputs with at most this many scores per sample are printed whole; larger ones as a top-k."""


@dataclass(frozen=True)
class Ranked:
    index: int
    score: float
    label: str | None


def image_geometry(spec: TensorSpec, layout: str) -> tuple[tuple[int, int] | None, int | None]:
    """((height, width), channels) that a 4-D image input declares, where they are fixed."""
    if spec.shape is None or len(spec.shape) != 4:
        return None, None
    _, c, h, w = spec.shape if layout == "nchw" else (spec.shape[0], spec.shape[3], *spec.shape[1:3])
    size = (h, w) if isinstance(h, int) and isinstance(w, int) else None
    return size, c if isinstance(c, int) else None


def image_preprocess(
    spec: TensorSpec | None,
    size: str | None,
    rgb: bool,
    scale: float,
    mean: str | None,
    std: str | None,
    layout: str,
) -> Preprocess:
    """The pre-processing the image options ask for, the size and channels defaulting to the input's."""
    declared_size, channels = image_geometry(spec, layout.lower()) if spec is not None else (None, None)
    return Preprocess(
        size=parse_size(size) if size else declared_size,
        channel_order="rgb" if rgb else "bgr",
        scale=scale,
        mean=parse_floats(mean, "--mean") if mean else (),
        std=parse_floats(std, "--std") if std else (),
        layout=layout.lower(),
        grayscale=channels == 1,
    )


def check_image_geometry(net: Model, preprocess: Preprocess) -> None:
    """Plan for the image tensor ``preprocess`` makes, before any image is decoded: a size the
    model refuses, or one beyond the memory limit (decoding takes about three times the tensor),
    fails at once instead of after the images were resized."""
    assert preprocess.size is not None
    height, width = preprocess.size
    channels = 1 if preprocess.grayscale else 3
    shape = (1, channels, height, width) if preprocess.layout == "nchw" else (1, height, width, channels)
    nbytes = 3 * math.prod(shape) * np.dtype(np.float32).itemsize
    net.options.budget.check(nbytes, f"decoding one image at {height}x{width}", InputError)
    net.plan_for(np.broadcast_to(np.zeros((), np.float32), shape))  # a stand-in: no memory behind it


def read_labels(path: Path | None) -> list[str]:
    if path is None:
        return []
    try:
        return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read labels file {path}: {exc}") from None


def rank_scores(scores: np.ndarray, k: int, labels: list[str]) -> list[Ranked]:
    """The k highest scores of a 1-D array, best first."""
    order = np.argsort(-scores, kind="stable")[:k]
    return [Ranked(int(i), float(scores[i]), labels[i] if i < len(labels) else None) for i in order]


def per_sample(output: np.ndarray) -> np.ndarray:
    """[N, ...] -> [N, features]; scalars and vectors count as one sample."""
    if output.ndim <= 1:
        return output.reshape(1, -1)
    return output.reshape(output.shape[0], -1)


def command(
    model: Path = typer.Argument(..., help="Model file (.onnx, .prototxt, .cfg, .ecnn)."),
    inputs: list[Path] = typer.Argument(..., help="Images (any format Pillow reads) or .npy arrays."),
    weights: Path | None = typer.Option(None, help="Weights file (.caffemodel, .weights)."),
    size: str | None = typer.Option(None, help="Resize images to HxW (default: the model's input size)."),
    rgb: bool = typer.Option(True, "--rgb/--bgr", help="Channel order the model was trained with."),
    scale: float = typer.Option(1.0, help="Multiply pixels (0..255) by this, e.g. 0.00392156862745098."),
    mean: str | None = typer.Option(None, help="Per-channel mean subtracted after scaling: a,b,c."),
    std: str | None = typer.Option(None, help="Per-channel std divided by after the mean: a,b,c."),
    layout: str = typer.Option("nchw", help="Tensor layout of the model's input: nchw or nhwc."),
    apply_softmax: bool = typer.Option(False, "--softmax", help="Apply softmax to each output's last axis."),
    top: int | None = typer.Option(None, min=1, help="Show the K best scores per output."),
    labels: Path | None = typer.Option(None, help="Text file with one class label per line."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
    threads: int | None = typer.Option(None, min=1, help="Threads (default: all cores)."),
    device: str = typer.Option("cpu", help="cpu, opencl[:N] or reference (`edgecnn devices` lists them)."),
) -> None:
    """Run MODEL on each INPUT and print its scores (top-k for large outputs)."""
    import edgecnn

    net = edgecnn.load(model, weights, threads=threads, device=device)
    if len(net.inputs) != 1:
        names = ", ".join(s.name for s in net.inputs)
        raise InputError(
            f"{model}: `edgecnn run` feeds one file per run to a one-input model; this one has "
            f"{len(net.inputs)} inputs ({names}) — use the Python API (Model.run with a dict)"
        )
    preprocess = image_preprocess(net.inputs[0], size, rgb, scale, mean, std, layout)
    if preprocess.size is not None and any(Path(p).suffix.lower() != ".npy" for p in inputs):
        check_image_geometry(net, preprocess)
    class_labels = read_labels(labels)
    report = []
    for path, array in zip(inputs, load_inputs(inputs, preprocess)):
        results = net.run(array)
        outputs = {}
        for name, value in results.items():
            if apply_softmax:
                value = softmax(SoftmaxAttrs(axis=-1), value.astype(np.float32, copy=False))
            rows = per_sample(value)
            k = min(top or 5, rows.shape[1])
            outputs[name] = (value, [rank_scores(row, k, class_labels) for row in rows])
        report.append((path, outputs))
    if as_json:
        print_json(report)
    else:
        print_text(report, show_top=top is not None)


def print_text(report: list[tuple[Path, dict]], show_top: bool) -> None:
    for path, outputs in report:
        console.print(headline(path))
        for name, (value, ranked_rows) in outputs.items():
            rows = per_sample(value)
            for sample, (row, ranked) in enumerate(zip(rows, ranked_rows)):
                tag = f"{name}" if len(rows) == 1 else f"{name}[{sample}]"
                if row.size <= SHOW_ALL_UP_TO and not show_top:
                    console.print(f"  {tag}: " + " ".join(f"{v:.6f}" for v in row))
                    continue
                console.print(f"  {tag} {list(value.shape)} top {len(ranked)}:")
                for r in ranked:
                    label = f"  {r.label}" if r.label else ""
                    console.print(f"    {r.index:>6d}  {r.score:.6f}{label}")


def print_json(report: list[tuple[Path, dict]]) -> None:
    document = [
        {
            "input": str(path),
            "outputs": {
                name: {
                    "shape": list(value.shape),
                    "values": value.tolist(),
                    "top": [[vars(r) for r in ranked] for ranked in ranked_rows],
                }
                for name, (value, ranked_rows) in outputs.items()
            },
        }
        for path, outputs in report
    ]
    print(json.dumps(document, indent=2))
