"""How close edgecnn runs to onnxruntime, OpenCV, LiteRT and its own reference kernels, layer by
layer, on the fixture models (random weights where the fixture has none), and how much room the
noise-based tolerance of `edgecnn compare` leaves.

For each (model, engine) it prints: the layers compared on the graph as imported, the first layer
over tolerance (none expected), the worst ratio of edgecnn's difference to the tolerance, the worst
ratio of edgecnn's difference to the engine's own noise, and the wall time of the comparison.

    .venv/bin/python lab/compare_engines.py [--threads 1]
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

from common import REPO, machine_line
from edgecnn.compare import compare_layers
from edgecnn.importers.caffe import write_random_caffemodel
from edgecnn.importers.darknet import write_random_weights

FIXTURES = Path("/work/shared/fixtures")


def darknet_at(cfg: Path, size: int, folder: Path) -> tuple[Path, Path]:
    """The cfg at ``size`` x ``size`` and seeded random weights for it."""
    copy = folder / cfg.name
    copy.write_text(re.sub(r"^(width|height)=\d+", rf"\1={size}", cfg.read_text(), flags=re.M))
    weights = folder / f"{cfg.stem}.weights"
    write_random_weights(copy, weights, seed=1)
    return copy, weights


def cases(folder: Path) -> list[tuple[str, Path, Path | None, tuple[str, ...]]]:
    """(label, model, weights, engines)."""
    face = FIXTURES / "simplecnn" / "face_binary_cls.onnx"
    found: list[tuple[str, Path, Path | None, tuple[str, ...]]] = [
        ("face_binary_cls.onnx", face, None, ("onnxruntime", "opencv", "reference"))
    ]
    for name in ("lenet", "bvlc_googlenet"):
        prototxt = REPO / "tests" / "fixtures" / "caffe" / f"{name}.deploy.prototxt"
        weights = folder / f"{name}.caffemodel"
        write_random_caffemodel(prototxt, weights, seed=1)
        found.append((f"{name} (Caffe, random weights)", prototxt, weights, ("opencv", "reference")))
    for name in ("yolov2-tiny", "yolov3-tiny"):
        cfg, weights = darknet_at(REPO / "tests" / "fixtures" / "darknet" / f"{name}.cfg", 160, folder)
        found.append((f"{name} 160x160 (Darknet, random weights)", cfg, weights, ("opencv", "reference")))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print(machine_line(args.threads))
    print()
    print("| model | engine | layers | first over | worst diff/tol | worst diff/noise | seconds |")
    print("|---|---|---:|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for label, model, weights, engines in cases(Path(tmp)):
            for engine in engines:
                start = time.perf_counter()
                result = compare_layers(model, engine, weights=weights, optimize=False, threads=args.threads)
                seconds = time.perf_counter() - start
                diffs = [row.diff for row in result.layers if row.diff is not None]
                to_tol = max((d.max_abs / d.tolerance for d in diffs if d.tolerance > 0), default=0.0)
                to_noise = max((d.max_abs / d.noise for d in diffs if d.noise > 0), default=0.0)
                first = result.first_over
                print(
                    f"| {label} | {engine} | {len(result.layers)} | {first.tensor if first else '-'} "
                    f"| {to_tol:.3f} | {to_noise:.1f} | {seconds:.1f} |"
                )


if __name__ == "__main__":
    main()
