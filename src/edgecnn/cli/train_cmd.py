"""`edgecnn train`: train a classifier (a model file or the built-in LeNet-5) on digits, MNIST IDX
files, an image folder or saved arrays (images or 1-D signals such as radar returns); optionally prune it (iteratively, retraining between cuts) and remove
whole filters; write the result as .ecnn."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from edgecnn.cli.console import console, headline, human_bytes, training_progress
from edgecnn.cli.prune_view import keep_option, percent, show_prune_retrain
from edgecnn.errors import InputError

if TYPE_CHECKING:
    from edgecnn.ir.graph import Graph
    from edgecnn.train import Dataset, EpochStats, Trainer

NAME = "train"


def command(
    model: Path | None = typer.Argument(None, help="Model to train (.onnx, .prototxt, .cfg, .ecnn)."),
    output: Path = typer.Option(..., "--output", "-o", help="The trained .ecnn file to write."),
    lenet5: bool = typer.Option(
        False, "--lenet5", help="Train a fresh LeNet-5 (seed 001 Table 3.5) instead of MODEL."
    ),
    dataset: str = typer.Option(
        "digits",
        help="digits (scikit-learn's, upsampled to 28x28), idx:DIR, folder:DIR, or npz:FILE (arrays "
        "'inputs' (N, C, H, W) or (N, C, L), 'labels', optional 'classes').",
    ),
    weights: Path | None = typer.Option(None, help="Weights file (.caffemodel, .weights) for MODEL."),
    epochs: int = typer.Option(20, min=0, help="Training epochs (0: prune/evaluate only)."),
    batch_size: int = typer.Option(64, min=1, help="Mini-batch size."),
    lr: float = typer.Option(0.03, min=0.0, help="Initial learning rate."),
    momentum: float = typer.Option(0.9, min=0.0, max=0.999, help="SGD momentum."),
    weight_decay: float = typer.Option(5e-4, min=0.0, help="L2 weight decay of the layer weights."),
    schedule: str = typer.Option("cosine", help="Learning-rate schedule: constant, step or cosine."),
    step_size: int = typer.Option(5, min=1, help="Epochs between decays of the step schedule."),
    gamma: float = typer.Option(0.2, min=0.0, max=1.0, help="Decay factor of the step schedule."),
    shift: int = typer.Option(2, min=0, help="Augmentation: random translation up to this many pixels."),
    seed: int = typer.Option(0, help="Seed of initialisation, shuffling, dropout and the test split."),
    test_fraction: float = typer.Option(
        0.2, min=0.01, max=0.99, help="Held-out share of digits/folder data."
    ),
    prune: list[str] = typer.Option(
        [],
        "--prune",
        metavar="[LAYER=]KEEP",
        help="After training, prune to KEEP of the largest-|w| weights: every layer (bare KEEP) or LAYER=KEEP; "
        "reached along 0.95, 0.90, ... with retraining after each cut.",
    ),
    structured: list[str] = typer.Option(
        [],
        "--structured",
        metavar="[LAYER=]KEEP",
        help="Remove whole filters/neurons (smallest L1 norm), then retrain.",
    ),
    retrain_steps: int = typer.Option(80, min=0, help="SGD steps of retraining after each pruning cut."),
    final_steps: int = typer.Option(0, min=0, help="Extra retraining steps after the last cut of --prune."),
    retrain_lr: float = typer.Option(0.01, min=0.0, help="Learning rate of retraining."),
    retention_step: float = typer.Option(
        0.05, min=0.001, max=1.0, help="Step of the falling retention schedule."
    ),
    checkpoint_dir: Path | None = typer.Option(
        None, help="Save a resumable checkpoint here after every epoch."
    ),
    resume_from: Path | None = typer.Option(
        None, "--resume", help="Continue from a checkpoint (its settings; --epochs extends)."
    ),
    threads: int = typer.Option(
        1, min=1, help="BLAS threads of training (results are reproducible per count)."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Train a classifier on a labelled image set, optionally prune it, and save it as .ecnn."""
    from edgecnn.compress import compress
    from edgecnn.compress.workflow import RetrainBudget
    from edgecnn.format import save_ecnn
    from edgecnn.importers import load_graph
    from edgecnn.train import TrainConfig, Trainer, build_lenet5, load_dataset, resume
    from edgecnn.train.evaluate import engine_accuracy

    if sum((model is not None, lenet5, resume_from is not None)) != 1:
        raise typer.BadParameter("give exactly one of MODEL, --lenet5 or --resume")
    keep, layers = keep_option(prune, "--prune")
    structured_keep, structured_layers = keep_option(structured, "--structured")
    config = TrainConfig(
        epochs=epochs, batch_size=batch_size, lr=lr, momentum=momentum, weight_decay=weight_decay,
        schedule=schedule, step_size=step_size, gamma=gamma, seed=seed, shift=shift, threads=threads,
    )  # fmt: skip
    if resume_from is not None:
        trainer = resume(resume_from, epochs=epochs, threads=threads)
        train, test = training_data(trainer.network.source, dataset, test_fraction, trainer.config.seed)
    else:
        graph = load_graph(model, weights) if model is not None else None
        if graph is None:
            train, test = load_dataset(dataset, (28, 28), 1, test_fraction, seed)
            if train.images.ndim != 4:
                raise InputError(
                    f"--lenet5 trains on images (N, C, H, W); {dataset} holds {train.images.shape}"
                )
            channels, height = train.images.shape[1:3]
            graph = build_lenet5(classes=len(train.classes), size=height, channels=channels, seed=seed)
        else:
            train, test = training_data(graph, dataset, test_fraction, seed)
        trainer = Trainer(graph, config)
    console.print(
        headline(
            trainer.network.source.name,
            f" on {dataset}: {len(train)} training, {len(test)} test samples "
            f"of {'x'.join(map(str, train.images.shape[1:]))}, {len(train.classes)} classes; "
            f"{sum(trainer.network.values[p].size for p in trainer.network.parameters):,} parameters",
        )
    )
    fit(trainer, train, test, checkpoint_dir, not quiet)
    if structured_keep is not None or structured_layers:
        trainer = remove_units(
            trainer,
            train,
            test,
            structured_keep,
            structured_layers,
            retrain_steps + final_steps,
            retrain_lr,
            not quiet,
        )
    if keep is not None or layers:
        budget = RetrainBudget(retrain_steps, final_steps, retrain_lr, retention_step)
        show_prune_retrain(trainer, train, test, keep, layers, budget, not quiet)
    trained = trainer.graph
    compressed, plan = compress(trained)
    save_ecnn(compressed, output, storage=plan)
    accuracy = engine_accuracy(compressed, test)
    console.print(
        f"test accuracy (edgecnn inference on the saved weights): {accuracy:.2%}; wrote {output} "
        f"({human_bytes(output.stat().st_size)})"
    )


def training_data(graph: Graph, spec: str, test_fraction: float, seed: int) -> tuple[Dataset, Dataset]:
    """(train, test) of ``spec`` shaped for ``graph``: images at its input size, arrays as saved."""
    from edgecnn.train import load_dataset
    from edgecnn.train.data import check_sample_shape, model_input_size

    if spec.startswith("npz:"):
        train, test = load_dataset(spec, test_fraction=test_fraction, seed=seed)
    else:
        channels, height, width = model_input_size(graph)
        train, test = load_dataset(spec, (height, width), channels, test_fraction, seed)
    check_sample_shape(graph, train)
    return train, test


def fit(trainer: Trainer, train: Dataset, test: Dataset, checkpoint_dir: Path | None, show: bool) -> None:
    """Run the remaining epochs with a progress bar and one line per epoch."""
    from edgecnn.train import save_checkpoint

    if trainer.epoch >= trainer.config.epochs:
        return
    console.print(
        f"{'epoch':>5}  {'lr':>8}  {'loss':>7}  {'train acc':>9}  {'test loss':>9}  {'test acc':>8}  {'s':>6}",
        style="bold",
    )
    with training_progress(show) as progress:
        task = progress.add_task(f"epoch {trainer.epoch + 1}", total=1, loss=float("nan"))

        def on_batch(index: int, total: int, loss: float) -> None:
            progress.update(task, completed=index + 1, total=total, loss=loss)

        def on_epoch(stats: EpochStats) -> None:
            console.print(
                f"{stats.epoch:>5}  {stats.lr:>8.5f}  {stats.loss:>7.4f}  {stats.accuracy:>9.2%}  "
                f"{stats.val_loss or 0:>9.4f}  {percent(stats.val_accuracy):>8}  {stats.seconds:>6.1f}"
            )
            if checkpoint_dir is not None:
                checkpoint_dir.mkdir(parents=True, exist_ok=True)
                save_checkpoint(trainer, checkpoint_dir / f"epoch-{stats.epoch}.ecnn")
            progress.update(task, description=f"epoch {stats.epoch + 1}", completed=0)

        started = time.perf_counter()
        trainer.fit(train, val=test, on_batch=on_batch, on_epoch=on_epoch)
    console.print(f"trained in {time.perf_counter() - started:.1f} s")


def remove_units(
    trainer: Trainer,
    train: Dataset,
    test: Dataset,
    keep: float | None,
    layers: dict[str, float],
    steps: int,
    lr: float,
    show: bool,
) -> Trainer:
    """Structured pruning, then ``steps`` of retraining of the smaller model (rate annealed from ``lr``)."""
    from edgecnn.compress.structured import prune_structured
    from edgecnn.train import Schedule, Trainer

    smaller, units = prune_structured(trainer.graph, keep, layers)
    retrained = Trainer(smaller, trainer.config)
    retrained.epoch = trainer.epoch
    before = retrained.evaluate(test)[1]
    with training_progress(show) as progress:
        task = progress.add_task("retrain", total=steps, loss=float("nan"))
        retrained.train_steps(
            train, steps, Schedule("cosine", lr, epochs=max(steps, 1)).at, stream=-1,
            on_batch=lambda i, total, loss: progress.update(task, completed=i + 1, loss=loss),
        )  # fmt: skip
    changes = ", ".join(f"{name} {a}->{b}" for name, (a, b) in units.items()) or "nothing removed"
    console.print(
        f"structured pruning: {changes}; test accuracy {before:.2%} after removal, "
        f"{retrained.evaluate(test)[1]:.2%} after {steps} retraining steps"
    )
    return retrained
