"""Wrap a storage plan's tensors in an entropy coder where that makes the file smaller (the
``edgecnn compress --entropy`` step). A coded tensor is decoded at load, so a raw tensor gives up
its zero-copy memory map: a coder is only added where it saves at least MIN_SAVING of the blob."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from edgecnn.errors import GraphError
from edgecnn.format.codec import ENTROPY_CODERS, StorageChoice
from edgecnn.format.entropy_codec import EntropyCodec, blob_bytes, delta_shuffle
from edgecnn.format.tensors import STORAGE_READERS, codec_for
from edgecnn.ir.graph import Graph

MIN_BYTES = 4096
"""Tensors smaller than this stay as they are (a few bytes saved, a decode at every load)."""
MIN_SAVING = 0.05
"""Smallest fraction of a blob the coder must save to be used."""
SAMPLE_BYTES = 1 << 21
"""Bytes of a blob coded to estimate what the coder saves on the whole (its first and last MiB)."""


def entropy_plan(graph: Graph, plan: Mapping[str, str | StorageChoice], coder: str) -> dict[str, str]:
    """``plan`` with ``+coder`` added to every initializer's storage (raw where unplanned) that the
    coder shrinks by MIN_SAVING or more (estimated on a sample); the rest are unchanged."""
    if coder not in ENTROPY_CODERS:
        raise GraphError(f"unknown entropy coder '{coder}' (use {' or '.join(ENTROPY_CODERS)})")
    result = {name: str(StorageChoice.parse(choice)) for name, choice in plan.items()}
    for name, value in graph.initializers.items():
        array = np.asarray(value)
        choice = StorageChoice.parse(result.get(name, "raw"))
        if choice.entropy or array.nbytes < MIN_BYTES:
            continue
        if coded_fraction(array, choice, coder) <= 1 - MIN_SAVING:
            result[name] = str(replace(choice, entropy=coder))
    return result


def coded_fraction(array: np.ndarray, choice: StorageChoice, coder: str) -> float:
    """Coded size / plain size of ``array``'s blob in ``choice``, estimated from at most SAMPLE_BYTES
    of it (lzma codes about 1 MB/s: coding every tensor twice, here and when saving, would double
    the time ``compress --entropy`` takes)."""
    codec = codec_for(choice.inner, "tensor")
    encoded = codec.encode(array, choice.inner, "tensor")
    layout = codec.layout(array.dtype.name, array.shape, encoded.params)
    blob = delta_shuffle(layout, blob_bytes(layout, encoded.arrays))
    if not blob:
        return 1.0
    if len(blob) > SAMPLE_BYTES:
        blob = blob[: SAMPLE_BYTES // 2] + blob[len(blob) - SAMPLE_BYTES // 2 :]  # both ends: every part
    coding = STORAGE_READERS[coder]
    assert isinstance(coding, EntropyCodec)
    return len(coding.compress(bytes(blob))) / len(blob)
