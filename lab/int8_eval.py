"""Top-1 agreement of int8 with float32 on the shipped evaluation sets (issue 37).

- digits: the small LeNet-5 in src/edgecnn/data/int8_eval (``--make-digits`` retrains it and
  rewrites the held-out set; scikit-learn needed) against its int8 form from edgecnn.compress
  (quantize_int8, calibrated on the 64 training digits shipped beside it): agreement and accuracy
  on the 359 held-out digits;
- zoo models (seeded weights): onnxruntime's quantize_static (QDQ, per-channel s8 weights, u8
  activations, as lab/int8_speed.py) and edgecnn's quantize_int8, both calibrated on 16 scene
  crops (edgecnn.compress.evaluation.scene_crops, seed 1), then on ``--images`` other crops
  (seed 0): edgecnn int8 (the QDQ model) vs edgecnn float32, onnxruntime int8 vs onnxruntime
  float32, and edgecnn's own int8 rewrite vs edgecnn float32.

    .venv/bin/python lab/int8_eval.py --models resnet18 mobilenetv2 --images 300
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

from common import machine_line, ort_options
from int8_speed import quantized

CALIBRATION = 16
"""Scene crops each zoo model is calibrated on (seed 1; the evaluation crops use seed 0)."""
DIGITS_WIDTHS = (8, 16, 64)
"""conv1, conv2 and ip1 of the shipped LeNet-5: small enough to ship (~90 KB), ~97% accurate."""


def make_digits(folder: Path, epochs: int) -> None:
    """Train the shipped digits classifier on the training split and write it, the held-out 8x8
    digits and 64 calibration digits from the training split."""
    from sklearn.datasets import load_digits

    from edgecnn.format import save_ecnn
    from edgecnn.train import TrainConfig, Trainer, build_lenet5, load_dataset
    from edgecnn.train.data.dataset import Dataset

    train, test = load_dataset("digits")  # the 0.2 held-out split of seed 0
    bunch = load_digits()
    raw = Dataset(
        np.asarray(bunch.images, np.uint8), np.asarray(bunch.target, np.int64), train.classes, "raw"
    )
    raw_train, raw_test = raw.split(0.2, 0)  # the same split over the same labels
    assert np.array_equal(raw_test.labels, test.labels)
    trainer = Trainer(
        build_lenet5(widths=DIGITS_WIDTHS), TrainConfig(epochs=epochs, lr=0.05, schedule="cosine", shift=1)
    )
    for stats in trainer.fit(train, val=test):
        print(stats)
    folder.mkdir(parents=True, exist_ok=True)
    save_ecnn(trainer.graph, folder / "digits_lenet5.ecnn")
    calibration = np.random.default_rng(0).choice(len(raw_train), 64, replace=False)
    np.savez_compressed(
        folder / "digits_test.npz",
        images=raw_test.images,
        labels=raw_test.labels.astype(np.uint8),
        calibration=raw_train.images[np.sort(calibration)],
    )


def digits(threads: int) -> None:
    from edgecnn.compress.evaluation import (
        digits_calibration,
        digits_classifier,
        digits_set,
        model_runner,
        top1_agreement,
    )
    from edgecnn.compress.int8 import quantize_int8
    from edgecnn.model import Model
    from edgecnn.runtime.options import RuntimeOptions

    graph, data = digits_classifier(), digits_set()
    options = RuntimeOptions.resolve(threads)
    int8 = quantize_int8(graph, digits_calibration(), threads=threads)
    result = top1_agreement(model_runner(Model(graph, options)), model_runner(Model(int8, options)), data)
    accuracy = f"{result.reference_accuracy:.2%} -> {result.candidate_accuracy:.2%}"
    print(
        f"| digits LeNet-5 | edgecnn compress int8 vs edgecnn float32 | {result.samples} | "
        f"{result.agreement:.2%} | {accuracy} | {result.max_abs_diff:.3g} |"
    )


def zoo(name: str, images: int, threads: int, folder: Path) -> None:
    import onnxruntime as ort

    import edgecnn
    from edgecnn.bench.zoo import default_cache_dir, model_path
    from edgecnn.compress.evaluation import model_runner, scene_crops, top1_agreement
    from edgecnn.compress.int8 import quantize_int8
    from edgecnn.importers import load_graph
    from edgecnn.model import Model
    from edgecnn.runtime.options import RuntimeOptions

    float_path = model_path(name, default_cache_dir())
    model = onnx.load(str(float_path))
    input_name = model.graph.input[0].name
    shape = [d.dim_value or 1 for d in model.graph.input[0].type.tensor_type.shape.dim]
    imagenet = name != "tiny-yolo"  # Darknet models take plain 0..1 RGB
    calibration = list(scene_crops(CALIBRATION, shape, seed=1, imagenet=imagenet).inputs)
    data = scene_crops(images, shape, seed=0, imagenet=imagenet)
    started = time.perf_counter()
    qdq_path = quantized(float_path, folder, calibration, input_name)
    graph = load_graph(str(float_path))
    options = RuntimeOptions.resolve(threads)
    ours = Model(quantize_int8(graph, calibration, threads=threads), options)
    print(f"<!-- {name}: quantised both ways in {time.perf_counter() - started:.1f} s -->")
    net32, net8 = edgecnn.load(str(float_path), threads=threads), edgecnn.load(str(qdq_path), threads=threads)
    sessions = [
        ort.InferenceSession(str(p), ort_options(threads), providers=["CPUExecutionProvider"])
        for p in (float_path, qdq_path)
    ]
    ort32, ort8 = ((lambda x, s=s: s.run(None, {input_name: x})[0]) for s in sessions)
    pairs = {
        "edgecnn int8 (QDQ) vs edgecnn float32": (model_runner(net32), model_runner(net8)),
        "onnxruntime int8 (QDQ) vs onnxruntime float32": (ort32, ort8),
        "edgecnn compress int8 vs edgecnn float32": (model_runner(net32), model_runner(ours)),
    }
    for label, (reference, candidate) in pairs.items():
        result = top1_agreement(reference, candidate, data)
        print(
            f"| {name} | {label} | {result.samples} | {result.agreement:.2%} | | {result.max_abs_diff:.3g} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--models",
        nargs="*",
        default=["resnet18", "resnet50", "mobilenetv2", "squeezenet1.1", "tiny-yolo", "googlenet"],
    )
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--make-digits", type=Path, metavar="DIR", help="retrain and write the digits files to DIR"
    )
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args()
    if args.make_digits:
        make_digits(args.make_digits, args.epochs)
        return
    print(machine_line(args.threads))
    print(
        "\n| set | runs compared | images | top-1 agreement | accuracy (float32 -> int8) | max abs score diff |"
        "\n|---|---|---:|---:|---:|---:|"
    )
    digits(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            zoo(name, args.images, args.threads, Path(tmp))
    print(machine_line(args.threads))


if __name__ == "__main__":
    main()
