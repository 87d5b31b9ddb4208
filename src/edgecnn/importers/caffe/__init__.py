"""Caffe importer: a text ``deploy.prototxt`` plus its binary ``.caffemodel`` -> Graph.

Both layer forms are read: the current ``layer { type: "Convolution" }`` and the legacy V1
``layers { type: CONVOLUTION }``; inputs may be declared with ``input:`` + ``input_shape`` /
``input_dim`` or with an ``Input`` layer. The batch dimension becomes symbolic (``N``), so one
model runs any batch size. In-place layers (top == bottom) get a fresh tensor named after the
layer; the graph's outputs are the blobs no later layer reads, as in Caffe. Layers that the TEST
phase excludes are dropped.

``weights=None`` is an error (made-up weights give made-up answers); tests and benchmarks use
``random_seed=N`` or :func:`write_random_caffemodel`. ``structure_only=True`` reads a prototxt
without weights for inspection (`edgecnn info`): every blob is zero-filled at its shape and the
graph's metadata says so (``STRUCTURE_ONLY``, tested by ``is_structure_only``), so the layer table,
parameter and MAC counts are right. Loading without weights stays an error everywhere else, so
`edgecnn run` and `edgecnn convert` refuse such a prototxt rather than compute with zeros.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgecnn.errors import EdgeCNNError, GraphError, ModelFormatError, UnsupportedOperatorError
from edgecnn.importers.caffe.layers import CONVERTERS
from edgecnn.importers.caffe.reader import (
    CaffeFormatWarning,
    blob_from_array,
    blob_to_array,
    parse_prototxt,
    read_caffemodel,
)
from edgecnn.importers.caffe.schema import V1_LAYER_TYPES, NetParameter
from edgecnn.importers.darknet.cfg import excerpt
from edgecnn.importers.darknet.layers import FLOAT_BYTES
from edgecnn.importers.darknet.weights import ParamKind, RandomWeights
from edgecnn.ir.graph import Graph, Node, Shape, TensorSpec, TensorType
from edgecnn.limits import MemoryBudget, Tally, regular_file_size
from edgecnn.runtime.shapes import infer_node, type_of_value

__all__ = [
    "STRUCTURE_ONLY",
    "CaffeFormatWarning",
    "is_structure_only",
    "load_caffe",
    "write_random_caffemodel",
]

TEST_PHASE = 1
BATCH = "N"
V1_TYPE_NAMES = {
    "ABSVAL": "AbsVal", "CONCAT": "Concat", "CONVOLUTION": "Convolution", "DECONVOLUTION": "Deconvolution",
    "DROPOUT": "Dropout", "ELTWISE": "Eltwise", "FLATTEN": "Flatten", "INNER_PRODUCT": "InnerProduct",
    "LRN": "LRN", "POOLING": "Pooling", "POWER": "Power", "RELU": "ReLU", "SIGMOID": "Sigmoid",
    "SOFTMAX": "Softmax", "SPLIT": "Split", "SLICE": "Slice", "TANH": "TanH",
}  # fmt: skip
V1_NUMBER_TO_NAME = {number: name for name, number in V1_LAYER_TYPES.items()}
MAX_RANK = 32
"""Input dimensions at most (numpy's own limit in 1.x, and .ecnn's)."""
STRUCTURE_ONLY = {"weights": "none: structure only, every blob zero-filled"}
"""The ``Graph.metadata`` entry of a graph loaded with ``structure_only=True``."""


@dataclass(frozen=True)
class CaffeLayer:
    """A layer in either schema form, with its type as the current form spells it."""

    name: str
    type: str
    bottoms: list[str]
    tops: list[str]
    message: Any


def network_layers(net: Any) -> list[CaffeLayer]:
    if net.layer and net.layers:
        raise ModelFormatError("the net mixes `layer` and legacy `layers` entries")
    if net.layer:
        return [CaffeLayer(m.name, m.type, list(m.bottom), list(m.top), m) for m in net.layer]
    layers = []
    for m in net.layers:
        legacy = V1_NUMBER_TO_NAME.get(m.type, str(m.type))
        layers.append(CaffeLayer(m.name, V1_TYPE_NAMES.get(legacy, legacy), list(m.bottom), list(m.top), m))
    return layers


def in_test_phase(message: Any) -> bool:
    """Caffe's NetStateRule check for phase TEST (levels and stages are not used at inference)."""
    if any(rule.HasField("phase") and rule.phase == TEST_PHASE for rule in message.exclude):
        return False
    if message.include:
        return any(not rule.HasField("phase") or rule.phase == TEST_PHASE for rule in message.include)
    return not (
        message.DESCRIPTOR.name == "LayerParameter"
        and message.HasField("phase")
        and message.phase != TEST_PHASE
    )


# ------------------------------------------------------------------ weights
class FileBlobs:
    """Blobs of a caffemodel (or of the prototxt itself), matched to layers by name."""

    def __init__(self, nets: list[tuple[str, Any]]) -> None:
        self._blobs: dict[str, tuple[str, list[Any]]] = {}
        for source, net in nets:
            for layer in network_layers(net):
                if layer.message.blobs:
                    self._blobs[layer.name] = (source, list(layer.message.blobs))

    def take(self, layer: str, index: int, kind: ParamKind, shape: tuple[int, ...]) -> np.ndarray:
        if layer not in self._blobs:
            raise ModelFormatError(f"layer '{excerpt(layer)}' has no weights in the caffemodel")
        source, blobs = self._blobs[layer]
        where = f"{source}: layer '{excerpt(layer)}' blob {index} ({kind.value})"
        if index >= len(blobs):
            raise ModelFormatError(f"{where}: the layer has only {len(blobs)} blob(s)")
        array = blob_to_array(blobs[index], where)
        if array.shape != shape:
            if array.size != int(np.prod(shape)) or array.ndim < len(shape):
                raise ModelFormatError(
                    f"{where}: expected shape {list(shape)}, the file has {excerpt(str(list(array.shape)))}"
                )
            array = array.reshape(shape)  # legacy 4-D blobs: (1, 1, outputs, inputs) for a matrix
        return array


class RandomBlobs:
    """Seeded random parameters of the right laws; remembers them so they can be saved."""

    def __init__(self, seed: int) -> None:
        self._random = RandomWeights(seed)
        self.blobs: dict[str, dict[int, np.ndarray]] = {}

    def take(self, layer: str, index: int, kind: ParamKind, shape: tuple[int, ...]) -> np.ndarray:
        values = self._random.take(layer, kind, shape)
        if kind is ParamKind.SCALES and shape == (1,):
            values = np.ones(1, np.float32)  # BatchNorm's scale factor: statistics stored as they are
        self.blobs.setdefault(layer, {})[index] = values
        return values


class ZeroBlobs:
    """Zero-filled blobs of the shapes the layers ask for: structure without weights."""

    def take(self, layer: str, index: int, kind: ParamKind, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape, np.float32)  # untouched pages of zeros cost no memory until written


WeightSource = FileBlobs | RandomBlobs | ZeroBlobs


# ------------------------------------------------------------------ builder
class GraphBuilder:
    """Collects nodes and constants, tracks each tensor's type, maps blob names to tensors."""

    def __init__(self, source: str, weights: WeightSource, tally: Tally) -> None:
        self.source = source
        self.weights = weights
        self.tally = tally
        self.nodes: list[Node] = []
        self.initializers: dict[str, np.ndarray] = {}
        self.types: dict[str, TensorType] = {}
        self.blob_tensor: dict[str, str] = {}  # Caffe blob name -> current tensor
        self.unread: dict[str, None] = {}  # blobs no later layer has read yet, in the order written

    def fresh(self, *candidates: str) -> str:
        for name in candidates:
            if name and name not in self.types and name not in self.initializers:
                return name
        base, index = candidates[-1], 1
        while f"{base}_{index}" in self.types or f"{base}_{index}" in self.initializers:
            index += 1
        return f"{base}_{index}"

    def declare(self, name: str, t: TensorType) -> None:
        self.types[name] = t
        self.blob_tensor[name] = name


class LayerContext:
    """What a converter sees of one layer (see layers.Context)."""

    def __init__(self, builder: GraphBuilder, layer: CaffeLayer) -> None:
        self.b = builder
        self.layer = layer
        self.name = layer.name
        self.type = layer.type
        self.params = layer.message
        self.top_count = len(layer.tops)
        missing = [x for x in layer.bottoms if x not in builder.blob_tensor]
        if missing:
            raise self.fail(f"reads blob(s) {', '.join(missing)} that no earlier layer produces")
        self.inputs = [builder.blob_tensor[x] for x in layer.bottoms]
        if not self.inputs:
            raise self.fail("has no bottom")
        if not layer.tops:
            raise self.fail("has no top")
        self._counter = 0

    def fail(self, message: str) -> ModelFormatError:
        """The layer's error; names and message elided, since a damaged file can make any of them long."""
        return ModelFormatError(
            f"{self.b.source}: layer '{excerpt(self.name)}' ({excerpt(self.type)}): {excerpt(message, 300)}"
        )

    def param(self, field: str) -> Any:
        """The layer's ``field`` parameter message; the legacy V1 form lacks those of newer layer types."""
        if field not in self.params.DESCRIPTOR.fields_by_name:
            raise self.fail(f"the legacy `layers` form has no {field}; use `layer`")
        return getattr(self.params, field)

    def shape(self, tensor: str) -> Shape:
        t = self.b.types[tensor]
        if t.shape is None:
            raise self.fail(f"the shape of '{tensor}' is unknown")
        return t.shape

    def blob_value(self, index: int, kind: ParamKind, shape: tuple[int, ...]) -> np.ndarray:
        self.b.tally.add(
            FLOAT_BYTES * math.prod(shape), f"layer '{excerpt(self.name)}' blob {index} ({kind.value})"
        )
        return self.b.weights.take(self.name, index, kind, shape)

    def blob(self, index: int, kind: ParamKind, shape: tuple[int, ...]) -> str:
        return self.constant(f"blob{index}", self.blob_value(index, kind, shape))

    def constant(self, suffix: str, value: np.ndarray) -> str:
        name = self.b.fresh(f"{self.name}/{suffix}")
        self.b.initializers[name] = value
        self.b.types[name] = type_of_value(value)
        return name

    def node(
        self, op: str, inputs: list[str], attrs: object, *, last: bool = False, outputs: int = 1
    ) -> list[str]:
        if last:
            names = [
                self.b.fresh(top, self.name if self.top_count == 1 else "", f"{self.name}/{top}")
                for top in self.layer.tops
            ]
        else:
            self._counter += 1
            names = [self.b.fresh(f"{self.name}/{op.lower()}{self._counter}") for _ in range(outputs)]
        node = Node(op, self.b.fresh(self.name) if last else names[0], list(inputs), names, attrs)
        in_types: list[TensorType | None] = [self.b.types[x] for x in inputs]
        in_values = [self.b.initializers.get(x) for x in inputs]
        try:
            out_types = infer_node(node, in_types, in_values)
        except GraphError as exc:
            raise self.fail(str(exc)) from None
        for name, t in zip(names, out_types):
            check_image_size(
                self.b.tally.budget,
                f"{self.b.source}: layer '{excerpt(self.name)}' output '{excerpt(name)}'",
                t,
            )
            self.b.types[name] = t
        self.b.nodes.append(node)
        return names


def check_image_size(budget: MemoryBudget, what: str, t: TensorType) -> None:
    """One image's worth of ``t`` (the batch, or any symbolic dimension, taken as 1) must fit
    ``budget``: the planner adds up whole batches, the importer refuses what can never fit."""
    if t.shape is None:
        return
    count = math.prod(d if isinstance(d, int) else 1 for d in t.shape)
    budget.check(
        count * np.dtype(t.dtype).itemsize, f"{what} of shape {excerpt(str(list(t.shape)))}", ModelFormatError
    )


def declared_inputs(net: Any, layers: list[CaffeLayer], source: str) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every input: the net's `input` fields and its Input layers."""
    inputs: list[tuple[str, tuple[int, ...]]] = []
    if net.input:
        if net.input_shape:
            shapes = [tuple(int(d) for d in s.dim) for s in net.input_shape]
        else:
            dims = [int(d) for d in net.input_dim]
            shapes = [tuple(dims[i : i + 4]) for i in range(0, len(dims), 4)]
        if len(shapes) != len(net.input):
            raise ModelFormatError(f"{source}: {len(net.input)} input(s) but {len(shapes)} input shape(s)")
        inputs.extend(zip(net.input, shapes))
    for layer in layers:
        if layer.type != "Input":
            continue
        shapes = [tuple(int(d) for d in s.dim) for s in layer.message.input_param.shape]
        if len(shapes) == 1 and len(layer.tops) > 1:
            shapes *= len(layer.tops)
        if len(shapes) != len(layer.tops):
            raise ModelFormatError(
                f"{source}: Input layer '{excerpt(layer.name)}' has {len(layer.tops)} tops but {len(shapes)} shapes"
            )
        inputs.extend(zip(layer.tops, shapes))
    for name, shape in inputs:
        if not shape or len(shape) > MAX_RANK or any(d < 1 or d > 1 << 24 for d in shape):
            raise ModelFormatError(
                f"{source}: input '{excerpt(name)}' has an invalid shape {excerpt(str(list(shape)))}"
            )
    if not inputs:
        raise ModelFormatError(
            f"{source}: the net declares no input (input: / input_shape or an Input layer)"
        )
    return inputs


def give_blob_names_to_final_versions(builder: GraphBuilder, inputs: set[str]) -> None:
    """After in-place layers, a Caffe blob name means the blob's last value (what Caffe shows
    after a forward pass): the final tensor takes the blob's name, the first version is renamed
    ``<blob>/<its layer>``."""
    producer = {out: node for node in builder.nodes for out in node.outputs}
    for blob, final in list(builder.blob_tensor.items()):
        if final == blob or blob in inputs or final not in producer:
            continue
        renames = [(final, blob)]
        if blob in builder.types:  # a tensor holds the name: an earlier version of the blob, moved aside
            if blob not in producer:
                continue  # a constant's name
            renames.insert(0, (blob, builder.fresh(f"{blob}/{producer[blob].name}")))
        for old, new in renames:
            for node in builder.nodes:
                node.inputs = [new if x == old else x for x in node.inputs]
                node.outputs = [new if x == old else x for x in node.outputs]
            builder.types[new] = builder.types.pop(old)
            producer[new] = producer.pop(old)  # later blobs see the names as they are now
            for name, tensor in builder.blob_tensor.items():
                if tensor == old:
                    builder.blob_tensor[name] = new


def build_graph(net: Any, weights: WeightSource, source: str, tally: Tally | None = None) -> Graph:
    """Convert a parsed NetParameter, taking blobs from ``weights``.

    Every blob is added to ``tally`` (default: a fresh one of :meth:`MemoryBudget.default`) before
    it is read or made, and every tensor's size for one image must fit its budget."""
    tally = tally or MemoryBudget.default().tally(source, ModelFormatError)
    layers = [layer for layer in network_layers(net) if in_test_phase(layer.message)]
    unsupported = [
        (excerpt(layer.type), excerpt(layer.name))
        for layer in layers
        if layer.type != "Input" and layer.type not in CONVERTERS
    ]
    if unsupported:
        raise UnsupportedOperatorError(unsupported, source)
    builder = GraphBuilder(source, weights, tally)
    specs = []
    for index, (name, shape) in enumerate(declared_inputs(net, layers, source)):
        if not name:
            raise ModelFormatError(f"{source}: input {index} has an empty name")
        spec = TensorSpec(name, "float32", (BATCH, *shape[1:]))
        check_image_size(tally.budget, f"{source}: input '{excerpt(name)}'", spec.type)
        builder.declare(name, spec.type)
        specs.append(spec)
    for layer in layers:
        if layer.type == "Input":
            continue
        ctx = LayerContext(builder, layer)
        for bottom in layer.bottoms:
            builder.unread.pop(bottom, None)
        try:
            tops = CONVERTERS[layer.type](ctx)
        except EdgeCNNError:
            raise
        except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError) as exc:
            raise ctx.fail(f"cannot convert: {exc}") from None
        for top, tensor in zip(layer.tops, tops):
            builder.blob_tensor[top] = tensor
            builder.unread.pop(top, None)
            builder.unread[top] = None
    give_blob_names_to_final_versions(builder, {spec.name for spec in specs})
    outputs = list(dict.fromkeys(builder.blob_tensor[blob] for blob in builder.unread))
    if not outputs:
        raise ModelFormatError(f"{source}: the net has no layer whose output nothing reads")
    return Graph(specs, outputs, builder.nodes, builder.initializers, name=net.name or Path(source).stem)


def load_caffe(
    path: str | os.PathLike[str],
    weights: str | os.PathLike[str] | None = None,
    *,
    random_seed: int | None = None,
    structure_only: bool = False,
    budget: MemoryBudget | None = None,
) -> Graph:
    """Read a prototxt and its caffemodel; see the module docstring for ``random_seed`` and
    ``structure_only`` (which applies only when neither a caffemodel nor the prototxt holds weights).

    ``budget`` bounds the files read and the blobs and tensors the layers declare (default: most
    of the memory available now)."""
    path = Path(path)
    budget = budget or MemoryBudget.default()
    tally = budget.tally(str(path), ModelFormatError)
    net = parse_prototxt(path, budget)
    tally.add(path.stat().st_size, "the prototxt")
    source: WeightSource
    if weights is not None:
        tally.add(regular_file_size(weights, "weights file"), "the weights file")
        source = FileBlobs([(str(weights), read_caffemodel(Path(weights), budget)), (str(path), net)])
    elif random_seed is not None:
        source = RandomBlobs(random_seed)
    elif any(layer.message.blobs for layer in network_layers(net)):
        source = FileBlobs([(str(path), net)])
    elif structure_only:
        graph = build_graph(net, ZeroBlobs(), str(path), tally)
        graph.metadata.update(STRUCTURE_ONLY)
        return graph
    else:
        raise ModelFormatError(
            f"{path}: a prototxt holds no weights; pass weights='<name>.caffemodel' (--weights on "
            f"the command line; `edgecnn info` reads the structure alone; tests and benchmarks may "
            f"call load_caffe(..., random_seed=N) for random weights)"
        )
    return build_graph(net, source, str(path), tally)


def is_structure_only(graph: Graph) -> bool:
    """Whether ``graph`` was loaded with ``structure_only=True`` (its blobs are zeros, not weights)."""
    return all(graph.metadata.get(key) == value for key, value in STRUCTURE_ONLY.items())


def write_random_caffemodel(
    prototxt: str | os.PathLike[str], out: str | os.PathLike[str], seed: int = 0
) -> None:
    """Write a caffemodel of seeded random blobs that fits ``prototxt`` (for tests and benchmarks)."""
    path = Path(prototxt)
    net = parse_prototxt(path)
    blobs = RandomBlobs(seed)
    build_graph(net, blobs, str(path))
    model = NetParameter(name=net.name)
    for layer in network_layers(net):
        if layer.name in blobs.blobs:
            entry = model.layer.add(name=layer.name, type=layer.type)
            by_index = blobs.blobs[layer.name]
            entry.blobs.extend(blob_from_array(by_index[i]) for i in sorted(by_index))
    Path(out).write_bytes(model.SerializeToString())
