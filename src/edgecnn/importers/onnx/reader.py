"""Read an ONNX ModelProto (with external-data weights) into an edgecnn Graph."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgecnn.errors import ModelFormatError, ModelNotFoundError, UnsupportedOperatorError
from edgecnn.importers.onnx.budget import check_external_data, check_sparse, declared_nbytes
from edgecnn.importers.onnx.dtypes import numpy_dtype_of
from edgecnn.importers.onnx.registry import OnnxNode, get_converter
from edgecnn.importers.onnx.wire import NotFastPath, WireModel, read_model
from edgecnn.ir.graph import Dim, Graph, Node, TensorSpec, TensorType
from edgecnn.limits import MemoryBudget, regular_file_size
from edgecnn.runtime.shapes import evaluate, infer_node

if TYPE_CHECKING:  # the onnx package is imported only where a file needs it (see wire.py)
    import onnx

MIN_OPSET = 7
MAX_TESTED_OPSET = 21
DEFAULT_DOMAINS = ("", "ai.onnx")


class OnnxOpsetWarning(UserWarning):
    """The model's opset is outside the range edgecnn's converters are tested on; it still loads."""


def warn_untested_opset(opset: int, source: str) -> None:
    """Warn, not fail: newer opsets mostly add operators, and older ones are upgraded by onnx."""
    if not MIN_OPSET <= opset <= MAX_TESTED_OPSET:
        how = (
            "onnx's version converter upgrades it"
            if opset < MIN_OPSET
            else f"converters read it by opset {MAX_TESTED_OPSET}'s rules"
        )
        warnings.warn(
            f"{source}: opset {opset} is outside the tested range {MIN_OPSET}-{MAX_TESTED_OPSET}; {how}",
            OnnxOpsetWarning,
            stacklevel=3,
        )


def load_onnx(path: str | os.PathLike[str], budget: MemoryBudget | None = None) -> Graph:
    """Parse ``path`` (weights in external files are read from beside it) into a Graph.

    Most files are decoded directly (wire.py: one copy of the weights, no onnx import); the rest,
    and damaged files, go through the onnx package. The file, external weights and sparse
    initializers are checked against ``budget`` (None: ``MemoryBudget.default()``) before reading."""
    model_path = Path(path)
    budget = budget or MemoryBudget.default()
    budget.check(regular_file_size(model_path), f"ONNX model {model_path}", ModelFormatError)
    try:
        wire_model = read_model(model_path)
        if default_opset(wire_model.opset_import) >= MIN_OPSET:  # older ones are upgraded by onnx
            return graph_from_wire_model(wire_model, str(path))
    except NotFastPath:
        pass
    return graph_from_model_proto(read_model_proto(model_path, budget), str(path))


def graph_from_model_proto(model: onnx.ModelProto, source: str = "<ModelProto>") -> Graph:
    """Convert an in-memory ModelProto (external data already loaded) into a Graph."""
    if not model.HasField("graph"):
        raise ModelFormatError(f"{source}: not an ONNX model (no graph found)")
    return OnnxGraphBuilder(model, source).build()


def default_opset(versions: Mapping[str, int]) -> int:
    """The model's opset for the default domain (opset_import: domain -> version)."""
    opset = next((versions[d] for d in DEFAULT_DOMAINS if d in versions), None)
    return MAX_TESTED_OPSET if opset is None else int(opset)


def check_operators(nodes: Iterable[tuple[str, str, str]], source: str) -> None:
    """Fail first, listing every operator that has no converter (with node names); ``nodes`` are
    (domain, op_type, name or "")."""
    unsupported = []
    for index, (domain, op_type, name) in enumerate(nodes):
        if domain not in DEFAULT_DOMAINS:
            unsupported.append((f"{domain}.{op_type}", name or f"{op_type}_{index}"))
        elif get_converter(op_type) is None:
            unsupported.append((op_type, name or f"{op_type}_{index}"))
    if unsupported:
        raise UnsupportedOperatorError(unsupported, source=source)


def check_graph_names(inputs: Sequence[str], outputs: Sequence[str], source: str) -> None:
    """ModelFormatError for a graph input or output named "": in ONNX "" marks an omitted optional
    input of a node, never a tensor of the graph."""
    for kind, names in (("input", inputs), ("output", outputs)):
        for index, name in enumerate(names):
            if not name:
                raise ModelFormatError(f"{source}: graph {kind} {index} has an empty name")


def graph_from_wire_model(model: WireModel, source: str) -> Graph:
    """A Graph from a directly decoded file (wire.py): the same steps as OnnxGraphBuilder.build."""
    check_operators(((n.domain, n.op_type, n.name) for n in model.nodes), source)
    check_graph_names([name for name, _ in model.inputs], [name for name, _ in model.outputs], source)
    opset = default_opset(model.opset_import)
    warn_untested_opset(opset, source)
    initializers = dict(model.initializers)
    inputs = []
    for name, t in model.inputs:
        if name in initializers:
            continue
        if t is None:
            raise ModelFormatError(f"{source}: input '{name}' is not a tensor")
        inputs.append(TensorSpec(name, t.dtype, t.shape))
    output_types = {name: t for name, t in model.outputs if t is not None}
    nodes: list[Node] = []
    for index, proto in enumerate(model.nodes):
        name = proto.name or f"{proto.op_type}_{index}"
        onnx_node = OnnxNode(
            op_type=proto.op_type,
            name=name,
            inputs=list(proto.inputs),
            outputs=list(proto.outputs),
            attributes=dict(proto.attributes),
            opset=opset,
            initializers=initializers,
        )
        convert_node(onnx_node, initializers, nodes, f"{source}: node '{name}' ({proto.op_type})")
    return Graph(
        inputs=inputs,
        outputs=[name for name, _ in model.outputs],
        nodes=nodes,
        initializers=initializers,
        name=model.graph_name or Path(source).stem,
        output_types=output_types,
        metadata=dict(model.metadata)
        | {"source_format": "onnx", "opset": str(opset), "producer": model.producer_name},
    )


def convert_node(
    onnx_node: OnnxNode, initializers: dict[str, np.ndarray], nodes: list[Node], where: str
) -> None:
    """Run the node's converter; append its nodes, or fold Constant results into ``initializers``."""
    converter = get_converter(onnx_node.op_type)
    assert converter is not None  # check_operators ran
    try:
        converted = converter(onnx_node)
    except (ValueError, TypeError, KeyError, IndexError, ArithmeticError) as exc:  # int(inf), 1e400
        raise ModelFormatError(f"{where}: {exc}") from None
    initializers.update(onnx_node.new_constants)
    for node in converted:
        if node.op == "Constant" and not any(node.inputs):
            _fold_constant(node, initializers, where)
        else:
            nodes.append(node)


def _fold_constant(node: Node, initializers: dict[str, np.ndarray], where: str) -> None:
    """Constant nodes become initializers so later converters can read their values."""
    try:
        infer_node(node, [], [])  # validates the attributes
        (value,) = evaluate(node, [])
    except Exception as exc:
        raise ModelFormatError(f"{where}: {exc}") from None
    initializers[node.outputs[0]] = value


def read_model_proto(path: Path, budget: MemoryBudget | None = None) -> onnx.ModelProto:
    import onnx
    import onnx.checker
    import onnx.external_data_helper
    from google.protobuf.message import DecodeError

    if not path.exists():
        raise ModelNotFoundError(f"model file not found: {path}")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, RuntimeWarning, ValueError, TypeError) as exc:
        raise ModelFormatError(f"{path}: not a valid ONNX model ({type(exc).__name__}: {exc})") from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ModelFormatError(f"{path}: not an ONNX model (no graph found)")
    tally = (budget or MemoryBudget.default()).tally(f"{path}: external weights", ModelFormatError)
    check_external_data(model, path.parent, tally, str(path))
    try:
        onnx.external_data_helper.load_external_data_for_model(model, str(path.parent))
    except FileNotFoundError as exc:
        raise ModelFormatError(f"{path}: external weights file missing: {exc.filename or exc}") from None
    except (OSError, ValueError, onnx.checker.ValidationError) as exc:
        raise ModelFormatError(f"{path}: cannot read external weights: {exc}") from None
    return model


def value_info_type(info: onnx.ValueInfoProto, where: str) -> TensorType | None:
    if not info.type.HasField("tensor_type"):
        return None
    tensor = info.type.tensor_type
    dtype = numpy_dtype_of(tensor.elem_type, where) if tensor.elem_type else "float32"
    if not tensor.HasField("shape"):
        return TensorType(dtype, None)
    dims: list[Dim] = []
    for d in tensor.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return TensorType(dtype, tuple(dims))


def decode_attribute(attr: onnx.AttributeProto, where: str) -> Any:
    import onnx
    from onnx import helper

    if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
        raise ModelFormatError(f"{where}: subgraph attribute '{attr.name}' (control flow) is not supported")
    try:
        value = helper.get_attribute_value(attr)
    except (ValueError, TypeError) as exc:
        raise ModelFormatError(f"{where}: damaged attribute '{attr.name}': {exc}") from None
    if value is None:
        raise ModelFormatError(f"{where}: attribute '{attr.name}' has no value (undefined type)")
    if isinstance(value, onnx.TensorProto):
        return tensor_to_array(value, f"{where} attribute '{attr.name}'")
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", errors="replace") for v in value]
    if isinstance(value, list) and value and isinstance(value[0], onnx.TensorProto):
        return [tensor_to_array(v, f"{where} attribute '{attr.name}'") for v in value]
    return value


def tensor_to_array(tensor: onnx.TensorProto, where: str) -> np.ndarray:
    from onnx import numpy_helper

    declared_nbytes(tensor.dims, tensor.data_type, where)
    try:
        return numpy_helper.to_array(tensor)
    except (ValueError, TypeError, OSError) as exc:
        raise ModelFormatError(f"{where}: damaged tensor data ({exc})") from None


class OnnxGraphBuilder:
    """Converts a ModelProto node by node; collects every unsupported operator before failing."""

    def __init__(self, model: onnx.ModelProto, source: str) -> None:
        self.model = model
        self.source = source
        self.opset = self._default_opset()

    def _default_opset(self) -> int:
        return default_opset({o.domain: o.version for o in self.model.opset_import})

    def _check_text_fields(self) -> None:
        """A damaged file can carry invalid UTF-8 in names, which protobuf hands back as bytes."""
        g = self.model.graph
        fields: list[object] = [g.name]
        for proto in g.node:
            fields += [proto.op_type, proto.domain, proto.name, *proto.input, *proto.output]
        fields += [v.name for v in (*g.input, *g.output)] + [t.name for t in g.initializer]
        if any(not isinstance(f, str) for f in fields):
            raise ModelFormatError(f"{self.source}: damaged model: a name is not valid UTF-8 text")

    def _check_operators(self) -> None:
        """Fail first, listing every operator that has no converter (with node names)."""
        check_operators(((p.domain, p.op_type, p.name) for p in self.model.graph.node), self.source)

    def build(self) -> Graph:
        self._check_text_fields()
        self._check_operators()
        warn_untested_opset(self.opset, self.source)
        if self.opset < MIN_OPSET:
            self.model = upgrade_opset(self.model, self.source)
            self.opset = MIN_OPSET
        g = self.model.graph
        initializers: dict[str, np.ndarray] = {}
        for tensor in g.initializer:
            initializers[tensor.name] = tensor_to_array(tensor, f"{self.source}: initializer '{tensor.name}'")
        for sparse in g.sparse_initializer:
            name = sparse.values.name
            initializers[name] = _densify(sparse, f"{self.source}: sparse initializer '{name}'")
        check_graph_names([i.name for i in g.input], [o.name for o in g.output], self.source)
        inputs = []
        for info in g.input:
            if info.name in initializers:
                continue  # IR < 4 lists initializers as inputs too; they stay constants
            t = value_info_type(info, f"{self.source}: input '{info.name}'")
            if t is None:
                raise ModelFormatError(f"{self.source}: input '{info.name}' is not a tensor")
            inputs.append(TensorSpec(info.name, t.dtype, t.shape))
        output_types = {}
        for info in g.output:
            t = value_info_type(info, f"{self.source}: output '{info.name}'")
            if t is not None:
                output_types[info.name] = t
        nodes: list[Node] = []
        for index, proto in enumerate(g.node):
            name = proto.name or f"{proto.op_type}_{index}"
            where = f"{self.source}: node '{name}' ({proto.op_type})"
            onnx_node = OnnxNode(
                op_type=proto.op_type,
                name=name,
                inputs=list(proto.input),
                outputs=list(proto.output),
                attributes={a.name: decode_attribute(a, where) for a in proto.attribute},
                opset=self.opset,
                initializers=initializers,
            )
            convert_node(onnx_node, initializers, nodes, where)
        return Graph(
            inputs=inputs,
            outputs=[o.name for o in g.output],
            nodes=nodes,
            initializers=initializers,
            name=g.name or Path(self.source).stem,
            output_types=output_types,
            metadata={p.key: p.value for p in self.model.metadata_props}
            | {"source_format": "onnx", "opset": str(self.opset), "producer": self.model.producer_name},
        )


def upgrade_opset(model: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """Models older than opset 7 are upgraded by onnx's own version converter."""
    import onnx.version_converter

    try:
        return onnx.version_converter.convert_version(model, MIN_OPSET)
    except Exception as exc:  # the converter raises assorted C++-backed errors
        raise ModelFormatError(
            f"{source}: opset is older than {MIN_OPSET} and onnx's version converter could not upgrade it: {exc}"
        ) from None


def _densify(sparse: onnx.SparseTensorProto, where: str) -> np.ndarray:
    check_sparse(sparse, MemoryBudget.default().tally("sparse initializers", ModelFormatError), where)
    values = tensor_to_array(sparse.values, where)
    indices = tensor_to_array(sparse.indices, where).astype(np.int64)
    shape = tuple(int(d) for d in sparse.dims)
    dense = np.zeros(int(np.prod(shape)), dtype=values.dtype)
    flat = indices if indices.ndim == 1 else np.ravel_multi_index(indices.T, shape)
    if flat.size and (flat.min() < 0 or flat.max() >= dense.size):
        raise ModelFormatError(f"{where}: sparse indices out of range")
    dense[flat] = values
    return dense.reshape(shape)
