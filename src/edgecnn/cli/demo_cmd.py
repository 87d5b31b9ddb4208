"""`edgecnn demo`: the bundled face classifier on its two sample images, scored and timed."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import typer
from rich.table import Table

from edgecnn.cli.console import console, headline
from edgecnn.cli.time_cmd import print_report, timed
from edgecnn.ops.activation import SoftmaxAttrs, softmax
from edgecnn.vision.preprocess import Preprocess

NAME = "demo"
CLASSES = ("background", "face")
SCALE = 1 / 255
"""The classifier was trained on BGR pixels scaled to [0, 1], as OpenCV delivers them."""


def bundled(relative: str) -> Path:
    """Path of a file shipped in the package's data directory."""
    return Path(str(resources.files("edgecnn") / "data" / relative))


def command(
    iterations: int = typer.Option(20, min=1, help="Timed forward passes for the timing table."),
) -> None:
    """Classify the bundled face/background samples with the bundled face classifier, then time it."""
    import edgecnn

    model_path = bundled("simplecnn/face_binary_cls.onnx")
    images = [bundled("simplecnn/samples/face.jpg"), bundled("simplecnn/samples/bg.jpg")]
    net = edgecnn.load(model_path)
    preprocess = Preprocess(size=(128, 128), channel_order="bgr", scale=SCALE)
    console.print(
        headline(model_path.name, f" (SimpleCNN face classifier, BSD-3-Clause) — {net}"), soft_wrap=True
    )
    table = Table(box=None, header_style="bold")
    for column in ("image", *CLASSES, "verdict"):
        table.add_column(column)
    for image in images:
        x = preprocess.image(image)
        scores = softmax(SoftmaxAttrs(axis=-1), net(x))[0]  # type: ignore[arg-type]
        table.add_row(image.name, *(f"{s:.6f}" for s in scores), CLASSES[int(scores.argmax())])
    console.print(table)
    console.print(
        f"the same from the command line: edgecnn run {model_path} {images[0]} "
        f"--bgr --scale {SCALE!r} --softmax",
        soft_wrap=True,
    )
    console.print()
    sample = preprocess.image(images[0])
    print_report(timed(net, {net.inputs[0].name: sample}, iterations, 3, show_progress=True))
