"""`edgecnn demo`: the bundled face classifier on its two sample images, scored and timed, then the
face detector built on it run over a bundled scene (boxes printed, annotated image written)."""

from __future__ import annotations

import tempfile
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
    save: Path | None = typer.Option(
        None, help="Directory for the annotated scene (default: a temporary one)."
    ),
    radar: bool = typer.Option(
        False,
        "--radar",
        help="Instead: seed 003's radar classifier (simulate, train, save, score, run on all cores).",
    ),
    seed: int = typer.Option(0, min=0, help="Seed of the radar example's returns and weights."),
) -> None:
    """Classify the bundled face/background samples with the bundled face classifier, then time it."""
    if radar:
        from edgecnn.cli.radar_view import radar_demo

        radar_demo(save, seed)
        return
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
        scores = softmax(SoftmaxAttrs(axis=-1), net(x))[0]
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
    console.print()
    detect_faces(bundled("vision/scene.jpg"), save)


def detect_faces(scene_path: Path, save: Path | None) -> None:
    """The face detector on ``scene_path``: a table of boxes and the annotated image written."""
    from PIL import Image

    from edgecnn.cli.detect_cmd import print_table
    from edgecnn.vision import Detector, draw_detections
    from edgecnn.vision.sources import Frame

    detector = Detector.faces()
    console.print(headline("face detection", f" — {detector.description}"), soft_wrap=True)
    with Image.open(scene_path) as img:
        image = img.convert("RGB")
    detections = detector.detect(image)
    print_table(Frame(image, str(scene_path), 0, None), detections)
    directory = save or Path(tempfile.mkdtemp(prefix="edgecnn-demo-"))
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / scene_path.name
    draw_detections(image, detections).save(target)
    console.print(f"annotated image: {target}", soft_wrap=True)
    console.print(
        f"the same from the command line: edgecnn detect --faces {scene_path} --save {directory}",
        soft_wrap=True,
    )
