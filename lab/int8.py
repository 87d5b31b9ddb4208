"""int8 execution against float32: the "int8 execution" section of docs/compression.md.

Models, each calibrated (edgecnn.compress.int8.quantize_int8) and run with the int8 kernels:
- LeNet-5 trained on scikit-learn's digits (edgecnn.train, seeded; cached in build/ after the first
  run): calibrated on 128 training images by each method; test accuracy and top-1 agreement with
  float32 on the 359 held-out images;
- the bundled SimpleCNN face classifier, calibrated on its two sample images;
- zoo models with seeded weights (edgecnn.bench.zoo), calibrated on 8 seeded standard-normal
  inputs, agreement on 16 others.
For each: .ecnn size against float32, and latency (median of Model.profile) of both at batch 1.

    .venv/bin/python lab/int8.py                       # writes the section into docs/compression.md
    .venv/bin/python lab/int8.py --print-only --zoo squeezenet1.1 --iterations 5
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import numpy as np

import edgecnn.kernels.cpu.int8.steps  # noqa: F401  (registers the int8 kernels)
from edgecnn.compress.int8 import agreement, quantize_int8
from edgecnn.format import load_ecnn, save_ecnn
from edgecnn.importers.onnx import load_onnx
from edgecnn.ir.graph import Graph
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.vision.preprocess import Preprocess

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "compression.md"
DATA = Path(str(resources.files("edgecnn") / "data" / "simplecnn"))
BEGIN, END = "<!-- lab/int8.py: begin -->", "<!-- lab/int8.py: end -->"
METHODS = ("minmax", "percentile", "kl")
TRAINING = {"epochs": 15, "lr": 0.01, "seed": 0}


def lenet_digits(path: Path) -> Graph:
    """LeNet-5 trained on digits (28x28), from ``path`` if an earlier run saved it there."""
    if path.exists():
        return load_ecnn(path)
    from edgecnn.train import TrainConfig, Trainer, build_lenet5, load_dataset

    train, test = load_dataset("digits")
    trainer = Trainer(build_lenet5(), TrainConfig(**TRAINING))  # type: ignore[arg-type]
    print(f"training LeNet-5 on digits ({TRAINING}) ...", file=sys.stderr)
    trainer.fit(train, val=test)
    path.parent.mkdir(parents=True, exist_ok=True)
    Model(trainer.graph).save(path)
    return load_ecnn(path)


def file_bytes(graph: Graph, folder: Path, name: str) -> int:
    path = folder / f"{name}.ecnn"
    save_ecnn(graph, path)
    return path.stat().st_size


def latency_ms(graph: Graph, x: np.ndarray, threads: int | None, iterations: int) -> float:
    model = Model(graph, RuntimeOptions.resolve(threads=threads))
    return model.profile(x, iterations=iterations, warmup=3).median_ms


def accuracy(graph: Graph, images: np.ndarray, labels: np.ndarray, threads: int | None) -> float:
    model = Model(graph, RuntimeOptions.resolve(threads=threads))
    predictions = [int(np.argmax(model(images[i : i + 1]))) for i in range(len(images))]
    return float(np.mean(np.asarray(predictions) == labels))


def kib(n: int) -> str:
    return f"{n / 1024:,.1f} KiB"


def lenet_rows(args: argparse.Namespace, folder: Path) -> list[str]:
    from edgecnn.train import load_dataset

    train, test = load_dataset("digits")
    graph = lenet_digits(Path(args.lenet))
    calibration = [train.images[i : i + 1] for i in range(128)]
    tests = [test.images[i : i + 1] for i in range(len(test))]
    float_size = file_bytes(graph, folder, "lenet-float")
    float_accuracy = accuracy(graph, test.images, test.labels, args.threads)
    float_ms = latency_ms(graph, tests[0], args.threads, args.iterations)
    rows = [
        "| calibration | .ecnn size | of float32 | test accuracy (float32 -> int8) | top-1 agreement "
        "| batch-1 latency float32 / int8 | calibration time |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for method in METHODS:
        start = time.perf_counter()
        int8 = quantize_int8(graph, calibration, method=method, threads=args.threads)
        seconds = time.perf_counter() - start
        size = file_bytes(int8, folder, f"lenet-{method}")
        agree = agreement(graph, int8, tests, args.threads)
        int8_ms = latency_ms(int8, tests[0], args.threads, args.iterations)
        rows.append(
            f"| {method} | {kib(size)} | {size / float_size:.1%} | {float_accuracy:.2%} -> "
            f"{accuracy(int8, test.images, test.labels, args.threads):.2%} | {agree.top1:.2%} "
            f"({agree.samples} images) | {float_ms:.3f} / {int8_ms:.3f} ms ({int8_ms / float_ms:.2f}x) "
            f"| {seconds:.1f} s |"
        )
    rows.append("")
    rows.append(f"float32 file: {kib(float_size)}; trained with TrainConfig({TRAINING}) on 1,438 digits.")
    return rows


def softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits.ravel().astype(np.float64) - logits.max())
    return z / z.sum()


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def face_rows(args: argparse.Namespace, folder: Path) -> list[str]:
    from edgecnn.compress.calibrate import calibration_inputs

    graph = load_onnx(DATA / "face_binary_cls.onnx")
    preprocess = Preprocess(size=(128, 128), channel_order="bgr", scale=1 / 255)  # as docs/compression.md
    samples = calibration_inputs(DATA / "samples", graph.inputs[0], preprocess=preprocess)
    int8 = quantize_int8(graph, samples, threads=args.threads)
    float_size, int8_size = file_bytes(graph, folder, "face-float"), file_bytes(int8, folder, "face-int8")
    reference, quantized = Model(graph), Model(int8)
    scores = []
    for name, x in zip(("bg.jpg", "face.jpg"), samples):  # calibration_inputs sorts by name
        before, after = softmax(reference(x)), softmax(quantized(x))
        scores.append(f"{name}: {before[0]:.4f} / {before[1]:.4f} -> {after[0]:.4f} / {after[1]:.4f}")
    float_ms = latency_ms(graph, samples[0], args.threads, args.iterations)
    int8_ms = latency_ms(int8, samples[0], args.threads, args.iterations)
    return [
        "| .ecnn float32 -> int8 | of float32 | batch-1 latency float32 / int8 "
        "| P(background) / P(face), float32 -> int8 |",
        "|---:|---:|---:|---|",
        f"| {kib(float_size)} -> {kib(int8_size)} | {int8_size / float_size:.1%} | {float_ms:.3f} / "
        f"{int8_ms:.3f} ms ({int8_ms / float_ms:.2f}x) | {'; '.join(scores)} |",
    ]


def zoo_rows(args: argparse.Namespace, folder: Path) -> list[str]:
    from edgecnn.bench.zoo import build_model
    from edgecnn.importers.onnx.reader import graph_from_model_proto

    rows = [
        "| model | .ecnn float32 -> int8 | of float32 | top-1 agreement | max abs output diff "
        "| batch-1 latency float32 / int8 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in args.zoo:
        graph = graph_from_model_proto(build_model(name, seed=0), name)
        spec = graph.inputs[0]
        shape = tuple(d if isinstance(d, int) else 1 for d in spec.shape or ())
        rng = np.random.default_rng(0)
        samples = [rng.standard_normal(shape).astype(np.float32) for _ in range(24)]
        int8 = quantize_int8(graph, samples[:8], threads=args.threads)
        agree = agreement(graph, int8, samples[8:], args.threads)
        float_size, int8_size = file_bytes(graph, folder, f"{name}-f"), file_bytes(int8, folder, f"{name}-q")
        float_ms = latency_ms(graph, samples[8], args.threads, args.iterations)
        int8_ms = latency_ms(int8, samples[8], args.threads, args.iterations)
        rows.append(
            f"| {name} | {kib(float_size)} -> {kib(int8_size)} | {int8_size / float_size:.1%} "
            f"| {agree.top1:.0%} ({agree.samples}) | {agree.max_abs_diff:.3g} | {float_ms:.2f} / "
            f"{int8_ms:.2f} ms ({int8_ms / float_ms:.2f}x) |"
        )
    return rows


def section(args: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory(prefix="edgecnn-int8-") as tmp:
        folder = Path(tmp)
        lenet, face, zoo = lenet_rows(args, folder), face_rows(args, folder), zoo_rows(args, folder)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    threads = args.threads or RuntimeOptions.resolve().threads
    return "\n".join(
        [
            BEGIN,
            "### Measured: int8 execution against float32",
            "",
            f"`{shlex.join(['.venv/bin/python', 'lab/int8.py', *sys.argv[1:]])}` on {cpu_name()} "
            f"({os.cpu_count()} cores), {threads} thread(s), "
            f"{args.iterations} timed runs after 3 warm-ups; load average at the end: {load}. "
            f"{args.note}",
            "",
            "**LeNet-5 on digits** (calibrated on 128 training images):",
            "",
            *lenet,
            "",
            "**SimpleCNN face classifier** (calibrated on its two sample images, min-max):",
            "",
            *face,
            "",
            "**Zoo models, seeded weights** (calibrated on 8 seeded N(0,1) inputs, min-max; agreement on 16 others):",
            "",
            *zoo,
            END,
        ]
    )


def write(text: str, docs: Path) -> None:
    """Replace the section between the markers (or append it) in ``docs``."""
    current = docs.read_text() if docs.exists() else ""
    if BEGIN in current and END in current:
        head, rest = current.split(BEGIN, 1)
        current = head + text + rest.split(END, 1)[1]
    else:
        current = current.rstrip("\n") + "\n\n" + text + "\n"
    docs.write_text(current)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lenet", default=str(ROOT / "build" / "lenet5-digits.ecnn"), help="trained LeNet-5 cache"
    )
    parser.add_argument("--zoo", nargs="*", default=["squeezenet1.1", "resnet18", "mobilenetv2"])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--docs", default=str(DOCS))
    parser.add_argument("--note", default="", help="a sentence about the machine (e.g. shared or quiet)")
    parser.add_argument("--print-only", action="store_true")
    args = parser.parse_args()
    text = section(args)
    print(text)
    if not args.print_only:
        write(text, Path(args.docs))


if __name__ == "__main__":
    main()
