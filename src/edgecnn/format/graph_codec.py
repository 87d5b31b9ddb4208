"""Graph <-> the GRAPH section's JSON document (the layout of the DATA section is planned here too)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgecnn.errors import GraphError
from edgecnn.format.attrs_codec import decode_attrs, encode_attrs
from edgecnn.format.checked_json import CheckedJson
from edgecnn.format.codec import StorageChoice
from edgecnn.format.errors import EcnnFormatError, EcnnUnsupportedError
from edgecnn.format.tensors import MAX_DIM, MAX_RANK, PlannedTensor, parse_storage_plan, plan_tensor
from edgecnn.ir.dtypes import SUPPORTED_DTYPES
from edgecnn.ir.graph import Graph, Node, Shape, TensorSpec, TensorType
from edgecnn.ops.registry import get_op, known_ops


@dataclass(frozen=True)
class EncodedGraph:
    document: dict[str, Any]
    tensors: list[PlannedTensor]
    data_length: int


# ------------------------------------------------------------------ encode
def encode_graph(
    graph: Graph, producer: str, storage: Mapping[str, str | StorageChoice] | None = None
) -> EncodedGraph:
    """The JSON document of ``graph`` and the placement of every array it holds.

    ``storage`` maps tensor table names (an initializer's own name) to a storage; the rest are raw.
    """
    graph.verify(known_ops())
    plan = parse_storage_plan(storage)
    tensors: list[PlannedTensor] = []
    taken: set[str] = set()

    def place(name: str, value: Any, where: str) -> str:
        unique, n = name, 1
        while unique in taken:
            n += 1
            unique = f"{name}#{n}"
        end = tensors[-1].offset + tensors[-1].nbytes if tensors else 0
        tensors.append(plan_tensor(unique, value, end, where, plan.get(unique, "raw")))
        taken.add(unique)
        return unique

    for name, value in graph.initializers.items():
        place(name, value, "initializer")
    nodes = []
    for i, node in enumerate(graph.nodes):
        label = node.name or f"node{i}"

        def sink(array: np.ndarray, where: str, label: str = label) -> str:
            return place(f"{label}:{where}", array, "attribute")

        attrs = encode_attrs(node, get_op(node.op).attrs_type, sink)
        nodes.append(
            {"op": node.op, "name": node.name, "inputs": node.inputs, "outputs": node.outputs, "attrs": attrs}
        )
    unplanned = sorted(set(plan) - taken)
    if unplanned:
        raise GraphError(
            f"cannot save graph '{graph.name}': the storage plan names tensor(s) it does not hold: "
            f"{', '.join(unplanned)}"
        )
    for key, text in graph.metadata.items():
        if not isinstance(key, str) or not isinstance(text, str):
            raise GraphError(
                f"cannot save graph '{graph.name}': metadata {key!r} -> {text!r} is not str -> str"
            )
    document = {
        "producer": producer,
        "name": graph.name,
        "metadata": dict(graph.metadata),
        "inputs": [
            {"name": s.name, "dtype": s.dtype, "shape": _encode_shape(s.shape, f"input '{s.name}'")}
            for s in graph.inputs
        ],
        "outputs": list(graph.outputs),
        "output_types": {
            name: {"dtype": t.dtype, "shape": _encode_shape(t.shape, f"output type of '{name}'")}
            for name, t in graph.output_types.items()
        },
        "initializers": list(graph.initializers),
        "nodes": nodes,
        "tensors": [t.entry() for t in tensors],
    }
    end = tensors[-1].offset + tensors[-1].nbytes if tensors else 0
    return EncodedGraph(document, tensors, end)


def _encode_shape(shape: Shape | None, where: str) -> list[int | str | None] | None:
    if shape is None:
        return None
    for d in shape:
        if not (d is None or isinstance(d, str) or (isinstance(d, (int, np.integer)) and 0 <= d <= MAX_DIM)):
            raise GraphError(f"cannot save {where}: dimension {d!r} is not a size, a name or None")
    return [d if d is None or isinstance(d, str) else int(d) for d in shape]


# ------------------------------------------------------------------ decode
TensorLookup = Callable[[str, str], np.ndarray]


def decode_graph(document: Any, tensors: dict[str, np.ndarray], check: CheckedJson) -> Graph:
    """Rebuild the Graph; ``tensors`` is the already checked and mapped tensor table."""
    doc = check.expect(document, dict, "GRAPH")

    def lookup(name: str, where: str) -> np.ndarray:
        if name not in tensors:
            check.fail(f"refers to tensor '{name}', which is not in the tensor table", where)
        return tensors[name]

    initializer_names = check.strings(check.member(doc, "initializers", list, "GRAPH"), "GRAPH.initializers")
    initializers: dict[str, np.ndarray] = {}
    for i, name in enumerate(initializer_names):
        if name in initializers:
            check.fail(f"initializer '{name}' is listed twice", f"GRAPH.initializers[{i}]")
        initializers[name] = lookup(name, f"GRAPH.initializers[{i}]")
    graph = Graph(
        inputs=_decode_inputs(check.member(doc, "inputs", list, "GRAPH"), check),
        outputs=_decode_output_names(check.member(doc, "outputs", list, "GRAPH"), check),
        nodes=_decode_nodes(check.member(doc, "nodes", list, "GRAPH"), check, lookup),
        initializers=initializers,
        name=check.member(doc, "name", str, "GRAPH"),
        output_types=_decode_output_types(check.member(doc, "output_types", dict, "GRAPH"), check),
        metadata=check.string_map(check.member(doc, "metadata", dict, "GRAPH"), "GRAPH.metadata"),
    )
    try:
        graph.verify()
    except GraphError as err:
        raise EcnnFormatError(check.source, f"the stored graph is inconsistent: {err}", "GRAPH") from None
    return graph


def _decode_shape(value: Any, where: str, check: CheckedJson) -> Shape | None:
    if value is None:
        return None
    dims = check.expect(value, list, where)
    if len(dims) > MAX_RANK:
        check.fail(f"rank {len(dims)} exceeds {MAX_RANK}", where)
    shape: list[int | str | None] = []
    for i, d in enumerate(dims):
        if d is None or isinstance(d, str):
            shape.append(d)
        else:
            shape.append(check.integer(d, f"{where}[{i}]", 0, MAX_DIM))
    return tuple(shape)


def _decode_type(value: Any, where: str, check: CheckedJson) -> tuple[str, Shape | None]:
    obj = check.expect(value, dict, where)
    dtype = check.member(obj, "dtype", str, where)
    if dtype not in SUPPORTED_DTYPES:
        check.fail(f"unknown dtype '{dtype}'", f"{where}.dtype")
    if "shape" not in obj:
        check.fail("missing key 'shape'", where)
    return dtype, _decode_shape(obj["shape"], f"{where}.shape", check)


def _decode_inputs(items: list[Any], check: CheckedJson) -> list[TensorSpec]:
    specs = []
    for i, item in enumerate(items):
        where = f"GRAPH.inputs[{i}]"
        obj = check.expect(item, dict, where)
        name = check.member(obj, "name", str, where)
        if not name:  # "" stands for an omitted optional input among a node's inputs
            check.fail("the input has an empty name", where)
        specs.append(TensorSpec(name, *_decode_type(obj, where, check)))
    return specs


def _decode_output_names(items: list[Any], check: CheckedJson) -> list[str]:
    names = check.strings(items, "GRAPH.outputs")
    for i, name in enumerate(names):
        if not name:
            check.fail("the output has an empty name", f"GRAPH.outputs[{i}]")
    return names


def _decode_output_types(items: dict[str, Any], check: CheckedJson) -> dict[str, TensorType]:
    return {
        name: TensorType(*_decode_type(value, f"GRAPH.output_types.{name}", check))
        for name, value in items.items()
    }


def _decode_nodes(items: list[Any], check: CheckedJson, lookup: TensorLookup) -> list[Node]:
    ops = known_ops()
    objects = [check.expect(item, dict, f"GRAPH.nodes[{i}]") for i, item in enumerate(items)]
    op_names = [check.member(obj, "op", str, f"GRAPH.nodes[{i}]") for i, obj in enumerate(objects)]
    names = [check.member(obj, "name", str, f"GRAPH.nodes[{i}]") for i, obj in enumerate(objects)]
    unknown = [f"'{name}' ({op})" for op, name in zip(op_names, names) if op not in ops]
    if unknown:
        raise EcnnUnsupportedError(
            check.source,
            f"operator(s) unknown to this edgecnn at node(s): {', '.join(unknown)}",
            "GRAPH.nodes",
        )
    nodes = []
    for i, (obj, op, name) in enumerate(zip(objects, op_names, names)):
        where = f"GRAPH.nodes[{i}] '{name}' ({op})"
        inputs = check.strings(check.member(obj, "inputs", list, where), f"{where}.inputs")
        outputs = check.strings(check.member(obj, "outputs", list, where), f"{where}.outputs")
        if "attrs" not in obj:
            check.fail("missing key 'attrs'", where)
        attrs = decode_attrs(obj["attrs"], get_op(op).attrs_type, f"{where}.attrs", check, lookup)
        nodes.append(Node(op, name, inputs, outputs, attrs))
    return nodes
