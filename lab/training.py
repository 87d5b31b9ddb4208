"""docs/training.md and docs/training-sensitivity.png: LeNet-5 trained on scikit-learn's digits with
edgecnn.train, the seed 001 sensitivity scan of every layer on a validation set, one-shot pruning of
the FC layers to 5%/10% against iterative prune-retrain, structured pruning, and `caffe time`-style
forward/backward timings. Every accuracy is measured by the inference engine (edgecnn.Model) on the
saved weights.

    .venv/bin/python lab/training.py            # writes docs/training.md + docs/training-sensitivity.png
    .venv/bin/python lab/training.py --quick    # fewer epochs and steps, prints only (a smoke run)
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from edgecnn.bench.machine import blas_library, cpu_model
from edgecnn.compress import compress, density, prune, sensitivity
from edgecnn.compress.charts import draw_sensitivity
from edgecnn.compress.retrain import prune_retrain
from edgecnn.compress.structured import prune_structured
from edgecnn.format import save_ecnn
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.train import Schedule, TrainConfig, Trainer, build_lenet5, load_dataset
from edgecnn.train.evaluate import accuracy_score, engine_accuracy
from edgecnn.train.timing import profile_training

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "training.md"
CHART = ROOT / "docs" / "training-sensitivity.png"
FC_TARGETS = {"ip1": 0.05, "ip2": 0.10}  # seed 001 §3.3.2


@dataclass(frozen=True)
class Settings:
    epochs: int
    retrain_steps: int
    retrain_lr: float
    final_steps: int
    seed: int


def stored_size(graph, folder: Path, name: str) -> int:  # type: ignore[no-untyped-def]
    """Bytes of the .ecnn file, with CSR chosen for weights where it is smaller."""
    compressed, plan = compress(graph)
    path = folder / name
    save_ecnn(compressed, path, storage=plan)
    return path.stat().st_size


def pct(x: float) -> str:
    return f"{x * 100:.2f}%"


def dense_then_pruned(seed: int, s: Settings) -> tuple[float, float]:
    """Test accuracy of the dense and the FC-pruned LeNet-5 for one seed (the main run's recipe)."""
    train_all, test = load_dataset("digits", seed=seed)
    train, _ = train_all.split(0.1, seed=seed + 1)  # the same training images as the main run's
    config = TrainConfig(epochs=s.epochs, batch_size=64, lr=0.03, schedule="cosine", shift=2, seed=seed)
    trainer = Trainer(build_lenet5(seed=seed), config)
    trainer.fit(train)
    dense = engine_accuracy(trainer.graph, test)
    prune_retrain(
        trainer, train, layers=FC_TARGETS, steps=s.retrain_steps, final_steps=s.final_steps, lr=s.retrain_lr
    )
    return dense, engine_accuracy(trainer.graph, test)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--retrain-steps", type=int, default=80, help="SGD steps after each pruning cut")
    parser.add_argument("--retrain-lr", type=float, default=0.01)
    parser.add_argument("--final-steps", type=int, default=600, help="extra steps after the last cut")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--extra-seeds",
        default="",
        help="comma-separated seeds to repeat dense training + prune-retrain with",
    )
    parser.add_argument(
        "--quick", action="store_true", help="3 epochs, 5 steps per cut; print, write nothing"
    )
    args = parser.parse_args()
    s = Settings(
        3 if args.quick else args.epochs,
        5 if args.quick else args.retrain_steps,
        args.retrain_lr,
        20 if args.quick else args.final_steps,
        args.seed,
    )
    lines: list[str] = []
    started = time.perf_counter()

    def out(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    train_all, test = load_dataset("digits", seed=s.seed)
    train, val = train_all.split(0.1, seed=s.seed + 1)
    config = TrainConfig(epochs=s.epochs, batch_size=64, lr=0.03, schedule="cosine", shift=2, seed=s.seed)

    out("## Dense LeNet-5 on digits")
    out()
    out(
        f"{len(train)} training, {len(val)} validation and {len(test)} test images (stratified, seed {s.seed}); "
        f"batch {config.batch_size}, SGD lr {config.lr} (cosine over {config.epochs} epochs), momentum "
        f"{config.momentum}, weight decay {config.weight_decay}, random shifts of up to {config.shift} px."
    )
    out()
    trainer = Trainer(build_lenet5(seed=s.seed), config)
    out("| epoch | lr | train loss | train acc | val acc | s |")
    out("|---:|---:|---:|---:|---:|---:|")
    for h in trainer.fit(train, val=val):
        out(
            f"| {h.epoch} | {h.lr:.5f} | {h.loss:.4f} | {pct(h.accuracy)} | {pct(h.val_accuracy or 0)} | {h.seconds:.1f} |"
        )
    dense = trainer.graph
    dense_accuracy = engine_accuracy(dense, test)
    out()
    out(f"**Dense test accuracy: {pct(dense_accuracy)}** (target >= 97%).")
    out()

    out("## Sensitivity scan (seed 001 §3.3, Fig. 3.14)")
    out()
    out("One layer pruned at a time to each retention, the others dense, no retraining; validation accuracy.")
    out()
    points = sensitivity(dense, accuracy_score(val))
    layers = list(dict.fromkeys(p.layer for p in points))
    keeps = sorted({p.keep for p in points}, reverse=True)
    table = {(p.layer, p.keep): p.score for p in points}
    out("| kept | " + " | ".join(layers) + " |")
    out("|---:|" + "---:|" * len(layers))
    for keep in keeps:
        out(f"| {keep:.2f} | " + " | ".join(pct(table[(layer, keep)]) for layer in layers) + " |")
    if not args.quick:
        draw_sensitivity(
            points,
            CHART,
            "LeNet-5 on digits: validation accuracy with one layer pruned",
            baseline=engine_accuracy(dense, val),
        )
        out()
        out(f"![sensitivity]({CHART.name})")
    out()

    out("## FC layers kept at 5% (ip1) and 10% (ip2)")
    out()
    one_shot = prune(dense, layers=FC_TARGETS)
    one_shot_accuracy = engine_accuracy(one_shot, test)
    stages = prune_retrain(
        trainer,
        train,
        layers=FC_TARGETS,
        steps=s.retrain_steps,
        final_steps=s.final_steps,
        lr=s.retrain_lr,
        step=0.05,
        val=val,
    )
    pruned = trainer.graph
    pruned_accuracy = engine_accuracy(pruned, test)
    out(
        f"Iterative prune-retrain: {len(stages)} cuts along 0.95, 0.90, ... (ip2 stops at 0.10), "
        f"{s.retrain_steps} SGD steps at lr {s.retrain_lr} after each cut ({s.retrain_steps + s.final_steps} after "
        "the last), masks held."
    )
    out()
    out("| stage | ip1 kept | ip2 kept | val acc after cut | val acc retrained |")
    out("|---:|---:|---:|---:|---:|")
    for st in stages:
        out(
            f"| {st.stage} | {st.keeps['ip1']:.2f} | {st.keeps['ip2']:.2f} | {pct(st.pruned_accuracy or 0)} | "
            f"{pct(st.accuracy or 0)} |"
        )
    out()
    with tempfile.TemporaryDirectory() as folder:
        dense_bytes = stored_size(dense, Path(folder), "dense.ecnn")
        pruned_bytes = stored_size(pruned, Path(folder), "pruned.ecnn")
    loss_points = (dense_accuracy - pruned_accuracy) * 100
    out("| model | ip1 density | ip2 density | test accuracy | .ecnn size |")
    out("|---|---:|---:|---:|---:|")
    out(f"| dense | 100% | 100% | {pct(dense_accuracy)} | {dense_bytes / 1024:.1f} KiB |")
    out(
        f"| one-shot prune, no retraining | {pct(density(one_shot.initializers['ip1.w']))} | "
        f"{pct(density(one_shot.initializers['ip2.w']))} | {pct(one_shot_accuracy)} | - |"
    )
    out(
        f"| prune-retrain | {pct(density(pruned.initializers['ip1.w']))} | "
        f"{pct(density(pruned.initializers['ip2.w']))} | {pct(pruned_accuracy)} | {pruned_bytes / 1024:.1f} KiB "
        f"({pruned_bytes / dense_bytes:.1%}, CSR) |"
    )
    out()
    change = round(-loss_points, 2) + 0.0  # no "-0.00"
    out(f"**Accuracy change after retraining: {change:+.2f} pt** (target: loss <= 0.5 pt).")
    out()

    extra = [int(x) for x in args.extra_seeds.split(",") if x.strip()]
    if extra:
        out("Other seeds (split, initialisation, shuffling), same settings:")
        out()
        out("| seed | dense test acc | prune-retrain test acc | change |")
        out("|---:|---:|---:|---:|")
        out(f"| {s.seed} | {pct(dense_accuracy)} | {pct(pruned_accuracy)} | {change:+.2f} pt |")
        for other in extra:
            a, b = dense_then_pruned(other, s)
            out(f"| {other} | {pct(a)} | {pct(b)} | {round((b - a) * 100, 2) + 0.0:+.2f} pt |")
        out()

    out("## Structured pruning (whole filters and neurons)")
    out()
    structured_layers = {"conv2": 0.5, "ip1": 0.2}
    smaller, units = prune_structured(dense, layers=structured_layers)
    removed_accuracy = engine_accuracy(smaller, test)
    retrainer = Trainer(smaller, config)
    structured_steps = s.retrain_steps + s.final_steps
    retrainer.train_steps(
        train, structured_steps, Schedule("cosine", s.retrain_lr, epochs=structured_steps).at, 99
    )
    structured_accuracy = engine_accuracy(retrainer.graph, test)
    params = lambda g: sum(int(np.size(v)) for v in g.initializers.values())  # noqa: E731
    out(
        f"Kept the largest-L1 {', '.join(f'{k}={v:g}' for k, v in structured_layers.items())} of units: "
        + ", ".join(f"{n} {a}->{b}" for n, (a, b) in units.items())
        + f"; parameters {params(dense):,} -> {params(smaller):,}. Test accuracy {pct(removed_accuracy)} right "
        f"after removal, {pct(structured_accuracy)} after {structured_steps} retraining steps (lr {s.retrain_lr} "
        "annealed to 0)."
    )
    one = test.images[:1]
    latency = {
        name: Model(graph, RuntimeOptions.resolve(threads=1)).profile(one, iterations=50, warmup=5).median_ms
        for name, graph in (("dense", dense), ("structured", retrainer.graph))
    }
    out()
    out(
        f"Batch-1 inference latency in edgecnn (1 thread, median of 50): dense {latency['dense']:.3f} ms, "
        f"structured {latency['structured']:.3f} ms."
    )
    out()

    out("## Forward and backward time per layer (`edgecnn time --backward`)")
    out()
    x = test.images[:64]
    with threadpool_limits(1):
        profile = profile_training(dense, x, iterations=20, warmup=3)
    out(
        f"Batch {x.shape[0]}, 1 BLAS thread (as training runs by default), mean of 20 iterations after 3 "
        "warm-up; the training code is numpy/BLAS (im2col GEMMs, col2im by strided adds) plus a numba kernel for 2-D max pooling."
    )
    out()
    out("| layer | op | forward ms | backward ms |")
    out("|---|---|---:|---:|")
    for row in profile.layers:
        out(f"| {row.name} | {row.op} | {row.forward_ms:.3f} | {row.backward_ms:.3f} |")
    out(f"| **total** | | {profile.mean_forward_ms:.3f} | {profile.mean_backward_ms:.3f} |")
    out()
    out(f"Average forward-backward: {profile.mean_forward_backward_ms:.3f} ms.")
    out()
    load = os.getloadavg()
    footer = (
        f"Machine (shared with other jobs while this ran): {cpu_model()} ({os.cpu_count()} cores, no GPU, "
        f"BLAS {blas_library()}), Python {platform.python_version()}, "
        f"numpy {np.__version__}; load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"whole run {time.perf_counter() - started:.0f} s. Command: "
        f"`{' '.join(['.venv/bin/python', 'lab/training.py', *sys.argv[1:]])}`."
    )
    out(footer)
    if args.quick:
        return
    DOC.write_text(HEADER + "\n".join(lines) + "\n" + FOOTER)
    print(f"wrote {DOC.relative_to(ROOT)} and {CHART.relative_to(ROOT)}", file=sys.stderr)


HEADER = """# Training, prune-retrain and structured pruning

`edgecnn.train` trains the classic CNN layers (Conv with groups/strides/pads/dilations, Gemm/MatMul,
max/average pooling, ReLU/LeakyReLU/Sigmoid/Tanh, BatchNormalization in training mode, dropout,
Flatten/Reshape) on the same Graph the engine runs, with softmax cross-entropy, SGD with momentum and
weight decay, step or cosine learning-rate schedules and seeded determinism (the same seed gives
bit-identical weights). Backward passes are numpy (BLAS products, im2col/col2im), checked against finite
differences in `tests/train`. Checkpoints are `.ecnn` files: loadable as models, resumable exactly.

```sh
# LeNet-5 on scikit-learn's digits (pip install 'edgecnn[train]'): 20 epochs, saved as .ecnn
edgecnn train --lenet5 --dataset digits -o lenet5.ecnn
# ... then keep 5% of ip1 and 10% of ip2: cuts at 0.95, 0.90, ..., 40 retraining steps after each
# (440 after the last); the saved file stores the sparse layers as CSR
edgecnn train lenet5.ecnn --epochs 0 --prune ip1=0.05 --prune ip2=0.1 --retrain-steps 40 --final-steps 400 \
    --retrain-lr 0.005 -o lenet5-sparse.ecnn
# remove half of conv2's filters (and conv2's readers' inputs), then retrain
edgecnn train lenet5.ecnn --epochs 0 --structured conv2=0.5 --retrain-steps 300 -o lenet5-narrow.ecnn
# your own data: MNIST IDX files (train-*/t10k-* in DIR) or one subfolder of images per class
edgecnn train --lenet5 --dataset idx:path/to/mnist -o mnist.ecnn
edgecnn train model.onnx --dataset folder:path/to/images --epochs 10 -o tuned.ecnn
# resumable checkpoints after every epoch
edgecnn train --lenet5 --epochs 20 --checkpoint-dir ckpt -o lenet5.ecnn
edgecnn train --resume ckpt/epoch-10.ecnn --epochs 20 -o lenet5.ecnn
# per-layer forward / backward / forward-backward times, like `caffe time`
edgecnn time lenet5.ecnn --backward --batch 64 --iterations 20
```

```python
from edgecnn.train import Trainer, TrainConfig, build_lenet5, load_dataset
from edgecnn.compress.retrain import prune_retrain

train, test = load_dataset("digits")
trainer = Trainer(build_lenet5(), TrainConfig(epochs=20, lr=0.03, schedule="cosine", shift=2))
trainer.fit(train, val=test)
prune_retrain(trainer, train, layers={"ip1": 0.05, "ip2": 0.1}, steps=80, final_steps=600, lr=0.01)
trainer.graph  # the trained Graph: edgecnn.Model(trainer.graph).save("lenet5.ecnn")
```

The numbers below come from `.venv/bin/python lab/training.py` (all of them, including the chart).

"""

FOOTER = """
## Notes

- LeNet-5 is the Caffe variant of seed 001 Table 3.5 (no activation after the convolutions, ReLU after
  ip1, Xavier-initialised); training reads the logits (input of the final Softmax).
- BatchNormalization in training mode normalises with the batch statistics and updates the running mean
  and (unbiased) variance with momentum 0.9; evaluation and inference use the running statistics.
- Dropout is inverted dropout (kept activations scaled by 1/(1-ratio)) drawn from the epoch's seeded
  stream; inference treats it as the identity.
- Weight decay applies to Conv/Gemm/MatMul weights only, not to biases or BatchNorm parameters.
- Masks from `edgecnn.compress.magnitude_mask` are held during retraining: masked weights get no gradient,
  no decay and no momentum, and stay exactly 0.
- The test set has 359 images, so one image is 0.28 pt: the <= 0.5 pt target allows one more mistake than the
  dense model. Seed 0 meets it; seeds 1 and 2 miss it by two images (-0.56 pt) with the same settings.
- The sensitivity scan uses the 143-image validation set (one image is 0.7 pt) and no retraining; the
  prune-retrain table shows how much retraining recovers after each cut.
"""


if __name__ == "__main__":
    main()
