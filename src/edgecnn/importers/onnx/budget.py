"""Sizes an ONNX file declares, checked before the onnx package reads or numpy allocates them.

Inline weights cannot outgrow the file, whose size is checked against the budget first; external
weights files and sparse initializers can, so their declared sizes are added up here before onnx
reads the external files or a sparse tensor is densified."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edgecnn.errors import ModelFormatError
from edgecnn.importers.onnx.dtypes import numpy_dtype_of
from edgecnn.limits import Tally, regular_file_size
from edgecnn.ops.common import MAX_RANK

if TYPE_CHECKING:
    import onnx


def declared_nbytes(dims: Sequence[int], elem_type: int, where: str) -> int:
    """Bytes of a tensor of ``dims`` and ONNX element type ``elem_type``; negative dims refused
    (numpy would read ``[-1, 4]`` as a shape to infer)."""
    if any(d < 0 for d in dims):
        raise ModelFormatError(f"{where}: negative dimension in {list(dims)[:8]}")
    if len(dims) > MAX_RANK:
        raise ModelFormatError(f"{where}: {len(dims)} dimensions, over the {MAX_RANK} supported")
    return math.prod(dims) * np.dtype(numpy_dtype_of(elem_type, where)).itemsize


def _main_graph_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Initializers and tensor attributes of the main graph (subgraphs are refused later)."""
    yield from model.graph.initializer
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors


def check_external_data(model: onnx.ModelProto, base: Path, tally: Tally, source: str) -> None:
    """Every external weights file a regular file, every declared size counted, before any is read."""
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    for tensor in _main_graph_tensors(model):
        if not uses_external_data(tensor):
            continue
        where = f"{source}: tensor '{tensor.name}'"
        info = ExternalDataInfo(tensor)
        size = regular_file_size(base / info.location, "external weights file")
        offset = int(info.offset or 0)
        read = int(info.length) if info.length else max(size - offset, 0)
        tally.add(max(read, declared_nbytes(tensor.dims, tensor.data_type, where)), f"tensor '{tensor.name}'")


def check_sparse(sparse: onnx.SparseTensorProto, tally: Tally, where: str) -> None:
    """A sparse initializer's dense size counted before it is densified."""
    tally.add(declared_nbytes(sparse.dims, sparse.values.data_type, where), where)
