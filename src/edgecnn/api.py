"""``edgecnn.load``: the one entry point for every model format."""

from __future__ import annotations

import os

from edgecnn.importers import load_graph
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions


def load(
    path: str | os.PathLike[str],
    weights: str | os.PathLike[str] | None = None,
    *,
    threads: int | None = None,
    device: str = "cpu",
) -> Model:
    """Load a model file; the importer is chosen by the file's content and extension.

    ``weights`` is the separate weights file of formats that have one (Caffe, Darknet).
    ``threads`` defaults to EDGECNN_NUM_THREADS, else to every core this process may use.
    """
    graph = load_graph(path, weights)
    return Model(graph, RuntimeOptions.resolve(threads=threads, device=device))
