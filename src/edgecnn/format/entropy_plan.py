"""Wrap a storage plan's tensors in an entropy coder where that makes the file smaller (the
``edgecnn compress --entropy`` step). A coded tensor is decoded at load, so a raw tensor gives up
its zero-copy memory map: a coder is only added where it saves at least MIN_SAVING of the blob."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from edgecnn.errors import GraphError
from edgecnn.format.codec import ENTROPY_CODERS, StorageChoice
from edgecnn.format.tensors import stored_nbytes
from edgecnn.ir.graph import Graph

MIN_BYTES = 4096
"""Tensors smaller than this stay as they are (a few bytes saved, a decode at every load)."""
MIN_SAVING = 0.05
"""Smallest fraction of a blob the coder must save to be used."""


def entropy_plan(graph: Graph, plan: Mapping[str, str | StorageChoice], coder: str) -> dict[str, str]:
    """``plan`` with ``+coder`` added to every initializer's storage (raw where unplanned) that the
    coder shrinks by MIN_SAVING or more; the rest are unchanged. Each candidate is coded once here."""
    if coder not in ENTROPY_CODERS:
        raise GraphError(f"unknown entropy coder '{coder}' (use {' or '.join(ENTROPY_CODERS)})")
    result = {name: str(StorageChoice.parse(choice)) for name, choice in plan.items()}
    for name, value in graph.initializers.items():
        array = np.asarray(value)
        choice = StorageChoice.parse(result.get(name, "raw"))
        if choice.entropy or array.nbytes < MIN_BYTES:
            continue
        plain = stored_nbytes(array, choice)
        coded = replace(choice, entropy=coder)
        if stored_nbytes(array, coded) <= plain * (1 - MIN_SAVING):
            result[name] = str(coded)
    return result
