"""The tables of docs/compression.md: raw vs float16, int8, pruned+CSR and pruned+int8 .ecnn files.

Models: the bundled SimpleCNN face classifier (with its two sample images' softmax scores before and
after) and BVLC AlexNet from tests/fixtures/caffe with seeded random weights (random_seed=0). For each
configuration: file size, warm load (load_ecnn, page cache warm), cold load + first run (the file's pages
dropped with posix_fadvise(DONTNEED) first), batch-1 latency (median of Model.profile), the max |output
difference| against the raw model on a seeded standard-normal input, and top-1 agreement on SAMPLES inputs.

    .venv/bin/python lab/compression.py            # prints Markdown tables
    .venv/bin/python lab/compression.py --only face --iterations 20
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from common import drop_from_page_cache
from edgecnn.compress import compress
from edgecnn.compress.report import seeded_feeds
from edgecnn.compress.sensitivity import top1
from edgecnn.format import load_ecnn, save_ecnn
from edgecnn.format.entropy_plan import entropy_plan
from edgecnn.importers.caffe import load_caffe
from edgecnn.importers.onnx import load_onnx
from edgecnn.ir.graph import Graph
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.vision.preprocess import Preprocess

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(str(resources.files("edgecnn") / "data" / "simplecnn"))
ALEXNET = ROOT / "tests" / "fixtures" / "caffe" / "bvlc_alexnet.deploy.prototxt"
FC_LAYERS = ("fc6", "fc7", "fc8")


@dataclass(frozen=True)
class Config:
    label: str
    prune: float | None = None
    prune_layers: Mapping[str, float] | None = None
    quantize: str | None = None
    entropy: str | None = None  # "zlib" or "lzma": entropy_plan over the compressed plan


FACE_CONFIGS = [
    Config("raw"),
    Config("fp16", quantize="fp16"),
    Config("int8", quantize="int8"),
    Config("prune 0.5 (stays dense)", prune=0.5),
    Config("prune 0.3 + csr", prune=0.3),
    Config("prune 0.3 + int8", prune=0.3, quantize="int8"),
    Config("prune 0.15 + csr", prune=0.15),
    Config("prune 0.15 + int8", prune=0.15, quantize="int8"),
]
FC_PRUNE = dict.fromkeys(FC_LAYERS, 0.15)
ALEXNET_ENTROPY_CONFIGS = [
    Config("raw"),
    Config("raw + zlib", entropy="zlib"),
    Config("int8", quantize="int8"),
    Config("int8 + zlib", quantize="int8", entropy="zlib"),
    Config("prune fc6-8 0.15 + csr (seed 001)", prune_layers=FC_PRUNE),
    Config("prune fc6-8 0.15 + csr + zlib", prune_layers=FC_PRUNE, entropy="zlib"),
    Config("prune all 0.15 + int8", prune=0.15, quantize="int8"),
    Config("prune all 0.15 + int8 + zlib", prune=0.15, quantize="int8", entropy="zlib"),
    Config("prune all 0.15 + int8 + lzma", prune=0.15, quantize="int8", entropy="lzma"),
]
ALEXNET_CONFIGS = [
    Config("raw"),
    Config("fp16", quantize="fp16"),
    Config("int8", quantize="int8"),
    Config("prune fc6-8 0.15 + csr (seed 001)", prune_layers=dict.fromkeys(FC_LAYERS, 0.15)),
    Config("prune all 0.15 + csr", prune=0.15),
    Config("prune fc6-8 0.15 + int8", prune_layers=dict.fromkeys(FC_LAYERS, 0.15), quantize="int8"),
    Config("prune all 0.15 + int8", prune=0.15, quantize="int8"),
]


@dataclass(frozen=True)
class Row:
    label: str
    file_bytes: int
    warm_load_ms: float
    cold_first_run_ms: float
    latency_ms: float
    max_abs_diff: float
    agreement: float
    extra: dict[str, str]


def median_ms(action: Callable[[], object], repeats: int, before: Callable[[], None] | None = None) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()  # unmaps the previous run's arrays so their pages can be dropped
        if before is not None:
            before()
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def measure(
    graph: Graph,
    config: Config,
    folder: Path,
    reference: Model,
    feeds: list[dict[str, np.ndarray]],
    options: RuntimeOptions,
    iterations: int,
    extra: Callable[[Model], dict[str, str]],
) -> Row:
    compressed, plan = compress(
        graph, prune=config.prune, prune_layers=config.prune_layers, quantize=config.quantize
    )
    if config.entropy is not None:
        plan = entropy_plan(compressed, plan, config.entropy)
    path = folder / "model.ecnn"
    start = time.perf_counter()
    save_ecnn(compressed, path, storage=plan)
    print(f"  {config.label}: written in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    del compressed
    warm = median_ms(lambda: load_ecnn(path), 3)
    cold = median_ms(
        lambda: Model(load_ecnn(path), options).run(feeds[0]), 3, lambda: drop_from_page_cache(path)
    )
    model = Model(load_ecnn(path), options)
    latency = model.profile(feeds[0], iterations=iterations, warmup=2).median_ms
    output = reference.graph.outputs[0]
    expected, got = reference.run(feeds[0])[output], model.run(feeds[0])[output]
    agreement = np.mean(
        [np.mean(top1(reference.run(f)[output]) == top1(model.run(f)[output])) for f in feeds]
    )
    return Row(
        config.label,
        path.stat().st_size,
        warm,
        cold,
        latency,
        float(np.abs(expected.astype(np.float64) - got).max()),
        float(agreement),
        extra(model),
    )


def face_scores(model: Model) -> dict[str, str]:
    """Softmax (background, face) of the two bundled sample images."""
    pre = Preprocess(size=(128, 128), channel_order="bgr", scale=1 / 255)
    scores = {}
    for image in ("face", "bg"):
        logits = np.asarray(model(pre.image(DATA / "samples" / f"{image}.jpg")))
        scores[f"{image}.jpg"] = " / ".join(f"{p:.4f}" for p in softmax(logits.astype(np.float64))[0])
    return scores


def run(
    name: str, graph: Graph, configs: list[Config], iterations: int, samples: int, threads: int, extra=None
) -> list[Row]:
    options = RuntimeOptions.resolve(threads=threads)
    with tempfile.TemporaryDirectory(prefix="edgecnn-compression-") as folder:
        raw_path = Path(folder) / "reference.ecnn"
        save_ecnn(graph, raw_path)
        reference = Model(load_ecnn(raw_path), options)
        feeds = seeded_feeds(reference, seed=0, count=samples)
        rows = []
        for config in configs:
            rows.append(
                measure(
                    graph,
                    config,
                    Path(folder),
                    reference,
                    feeds,
                    options,
                    iterations,
                    extra or (lambda m: {}),
                )
            )
            print(f"  {name}: {config.label} done", file=sys.stderr)
    return rows


def markdown(title: str, rows: list[Row], samples: int) -> str:
    raw = rows[0]
    extra_keys = list(raw.extra)
    head = (
        "| storage | file | vs raw | warm load (ms) | cold load + 1st run (ms) | latency (ms) | max abs diff "
        f"| top-1 agree ({samples}) |" + "".join(f" {k}: P(background) / P(face) |" for k in extra_keys)
    )
    lines = [f"### {title}", "", head, "|---" * (8 + len(extra_keys)) + "|"]
    for r in rows:
        lines.append(
            f"| {r.label} | {r.file_bytes / 1e6:.3f} MB | {r.file_bytes / raw.file_bytes:.1%} | {r.warm_load_ms:.1f} "
            f"| {r.cold_first_run_ms:.0f} | {r.latency_ms:.1f} | {r.max_abs_diff:.3g} | {r.agreement:.0%} |"
            + "".join(f" {r.extra[k]} |" for k in extra_keys)
        )
    return "\n".join(lines)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores visible, Linux {platform.release()}, Python {platform.python_version()}, numpy {np.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        choices=("face", "alexnet", "alexnet-entropy"),
        help="alexnet-entropy: only the entropy-coding table, also written into docs/compression.md",
    )
    parser.add_argument("--iterations", type=int, default=10, help="Timed runs per model (median).")
    parser.add_argument("--samples", type=int, default=8, help="Random inputs for top-1 agreement.")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(f"Machine: {machine()}; {args.threads} threads.\n")
    if args.only in (None, "face"):
        graph = load_onnx(DATA / "face_binary_cls.onnx")
        rows = run("face", graph, FACE_CONFIGS, args.iterations, args.samples, args.threads, face_scores)
        print(markdown("SimpleCNN face classifier", rows, args.samples) + "\n")
    if args.only in (None, "alexnet"):
        graph = load_caffe(ALEXNET, random_seed=0)
        rows = run("alexnet", graph, ALEXNET_CONFIGS, args.iterations, args.samples, args.threads)
        print(markdown("BVLC AlexNet, seeded random weights", rows, args.samples) + "\n")
    if args.only in (None, "alexnet-entropy"):
        graph = load_caffe(ALEXNET, random_seed=0)
        rows = run("alexnet", graph, ALEXNET_ENTROPY_CONFIGS, args.iterations, args.samples, args.threads)
        table = markdown("BVLC AlexNet with entropy-coded weights", rows, args.samples)
        print(table + "\n")
        write_entropy_section(table, args.threads)


def write_entropy_section(table: str, threads: int) -> None:
    """The table into docs/compression.md, between its markers (the rest of the page is kept)."""
    from sparse_docs import machine_line, replace_section

    body = "\n".join(
        [
            table,
            "",
            "Same model, columns and method as the table above; *+ zlib* / *+ lzma*: `compress(...)`, then",
            "`entropy_plan(graph, plan, coder)` (what `edgecnn compress --entropy` does), format 1.2.",
            "Reading: the coders pay off on CSR (their filter turns column indices into small differences)",
            "and little on dense float or int8 values, which are close to random bytes; a coded file is",
            "decoded at every load, so it loads slower than its uncoded form, lzma several times slower",
            "than zlib. Latency depends on the pruning, not on the coding (weights are decoded before",
            "the plan is built); on a shared machine that column is mostly noise.",
            machine_line(threads),
            "Command: `.venv/bin/python lab/compression.py --only alexnet-entropy`.",
        ]
    )
    replace_section("entropy-alexnet", body, before="## Not done yet (rest of issue 5)")


if __name__ == "__main__":
    main()
