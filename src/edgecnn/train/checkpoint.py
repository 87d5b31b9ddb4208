"""Checkpoints are .ecnn models (loadable by edgecnn.load) that also carry the training state:
momentum buffers and masks as extra tensors, the epoch, config and history as JSON metadata."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, fields, replace
from typing import Any

import numpy as np

from edgecnn.errors import ModelFormatError
from edgecnn.ir.graph import Graph
from edgecnn.train.trainer import EpochStats, TrainConfig, Trainer

STATE_KEY = "edgecnn.train"
VELOCITY = "train.velocity/"
MASK = "train.mask/"


def training_graph(trainer: Trainer) -> Graph:
    """The trainer's model plus its optimiser state and masks."""
    graph = trainer.graph
    for name, velocity in trainer.optimizer.velocity.items():
        graph.initializers[VELOCITY + name] = np.array(velocity, copy=True)
    for name, mask in trainer.masks.items():
        graph.initializers[MASK + name] = mask.astype(np.uint8)
    state = {
        "epoch": trainer.epoch,
        "config": asdict(trainer.config),
        "history": [asdict(h) for h in trainer.history],
    }
    graph.metadata[STATE_KEY] = json.dumps(state)
    return graph


def save_checkpoint(trainer: Trainer, path: str | os.PathLike[str]) -> None:
    """Write the trainer's model and state to ``path`` atomically (save_ecnn): a save killed or
    failed half-way leaves the previous checkpoint whole, and the next save clears its temporary."""
    from edgecnn.format import save_ecnn

    save_ecnn(training_graph(trainer), path)


def strip_training_state(
    graph: Graph,
) -> tuple[Graph, dict[str, np.ndarray], dict[str, np.ndarray], dict[str, Any]]:
    """(plain model, velocities, masks, state) from a checkpoint's graph."""
    model = graph.copy()
    velocity = {
        k[len(VELOCITY) :]: np.array(v) for k, v in graph.initializers.items() if k.startswith(VELOCITY)
    }
    masks = {
        k[len(MASK) :]: np.asarray(v).astype(bool)
        for k, v in graph.initializers.items()
        if k.startswith(MASK)
    }
    model.initializers = {
        k: np.array(v) for k, v in graph.initializers.items() if not k.startswith((VELOCITY, MASK))
    }
    text = model.metadata.pop(STATE_KEY, None)
    try:
        state = json.loads(text) if text is not None else {}
    except json.JSONDecodeError as exc:
        raise ModelFormatError(f"graph '{graph.name}': training state metadata is not JSON: {exc}") from None
    return model, velocity, masks, state


def resume(path: str | os.PathLike[str], **overrides: Any) -> Trainer:
    """A Trainer that continues from checkpoint ``path``; ``overrides`` replace config fields
    (e.g. ``epochs=20`` to train further)."""
    from edgecnn.format import load_ecnn

    model, velocity, masks, state = strip_training_state(load_ecnn(path))
    if not state:
        raise ModelFormatError(f"{path}: not a training checkpoint (no '{STATE_KEY}' metadata)")
    known = {f.name for f in fields(TrainConfig)}
    config = TrainConfig(**{k: v for k, v in state.get("config", {}).items() if k in known})
    trainer = Trainer(model, replace(config, **overrides))
    trainer.epoch = int(state.get("epoch", 0))
    trainer.history = [EpochStats(**h) for h in state.get("history", [])]
    trainer.optimizer.velocity = {
        k: v.astype(trainer.network.values[k].dtype)
        for k, v in velocity.items()
        if k in trainer.network.values
    }
    if masks:
        trainer.set_masks(masks)
    return trainer
