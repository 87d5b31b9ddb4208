"""The confusion matrix as a PNG (matplotlib, the ``plot`` extra), written atomically."""

from __future__ import annotations

import io
import os
from typing import BinaryIO

import numpy as np

from edgecnn.atomic import atomic_write
from edgecnn.errors import ConfigurationError, InputError
from edgecnn.radar.classifier import Evaluation


def confusion_png(evaluation: Evaluation, path: str | os.PathLike[str], title: str = "") -> None:
    """Rows: true class, columns: predicted class, each cell the share of its row (count printed)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigurationError(
            "the confusion matrix figure needs matplotlib: pip install 'edgecnn[plot]'"
        ) from None
    counts = evaluation.confusion
    shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    size = len(evaluation.classes)
    figure = Figure(figsize=(2.2 + 0.62 * size, 1.6 + 0.55 * size), dpi=110)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    image = axes.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0)
    for i in range(size):
        for j in range(size):
            if counts[i, j]:
                colour = "white" if shares[i, j] > 0.6 else "black"
                axes.text(j, i, str(counts[i, j]), ha="center", va="center", fontsize=8, color=colour)
    axes.set_xticks(range(size), evaluation.classes, rotation=45, ha="right", fontsize=8)
    axes.set_yticks(range(size), evaluation.classes, fontsize=8)
    axes.set_xlabel("predicted class")
    axes.set_ylabel("true class")
    axes.set_title(title or f"accuracy {evaluation.accuracy:.1%}", fontsize=10)
    figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04, label="share of the true class")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")

    def write(file: BinaryIO) -> None:
        file.write(buffer.getvalue())

    atomic_write(path, write, error=InputError, what="confusion matrix figure")
