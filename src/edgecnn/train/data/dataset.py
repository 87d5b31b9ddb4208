"""A labelled image set in memory (float32 NCHW in 0..1, or NCL signals; int64 labels) and its seeded
splits."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from edgecnn.errors import InputError


@dataclass(frozen=True)
class Dataset:
    images: np.ndarray  # float32 (N, C, H, W), or (N, C, L) for 1-D signals such as radar returns
    labels: np.ndarray  # int64 (N,)
    classes: tuple[str, ...]
    name: str = "dataset"

    def __post_init__(self) -> None:
        if self.images.ndim not in (3, 4) or self.labels.shape != (self.images.shape[0],):
            raise InputError(
                f"{self.name}: expected images (N, C, H, W) or signals (N, C, L) and labels (N,), "
                f"got {list(self.images.shape)} and {list(self.labels.shape)}"
            )
        if self.labels.size and (self.labels.min() < 0 or self.labels.max() >= len(self.classes)):
            raise InputError(f"{self.name}: labels must be in 0..{len(self.classes) - 1}")

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def subset(self, indices: np.ndarray, name: str | None = None) -> Dataset:
        return Dataset(self.images[indices], self.labels[indices], self.classes, name or self.name)

    def split(self, fraction: float, seed: int = 0) -> tuple[Dataset, Dataset]:
        """(rest, held-out) with ``fraction`` of every class held out, chosen by ``seed``."""
        if not 0.0 < fraction < 1.0:
            raise InputError(f"split fraction must be in (0, 1), got {fraction}")
        rng = np.random.default_rng(seed)
        held: list[np.ndarray] = []
        for label in range(len(self.classes)):
            members = np.flatnonzero(self.labels == label)
            count = round(fraction * members.size)
            held.append(rng.permutation(members)[:count])
        mask = np.zeros(len(self), bool)
        mask[np.concatenate(held) if held else []] = True
        return (
            self.subset(np.flatnonzero(~mask), f"{self.name}/train"),
            self.subset(np.flatnonzero(mask), f"{self.name}/held-out"),
        )

    def batches(
        self, batch_size: int, rng: np.random.Generator | None = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Mini-batches in a random order drawn from ``rng`` (in order when None); the last may be short."""
        if batch_size < 1:
            raise InputError(f"batch size must be >= 1, got {batch_size}")
        order = rng.permutation(len(self)) if rng is not None else np.arange(len(self))
        for start in range(0, len(self), batch_size):
            chosen = order[start : start + batch_size]
            yield self.images[chosen], self.labels[chosen]
