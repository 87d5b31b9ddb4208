"""One converter per Darknet layer type: cfg options (+ weights) -> edgecnn nodes.

Converters run in file order: each reads its parameters from the weight source in Darknet's
order, and knows its input's Darknet shape (C, H, W), so every size is checked here, at the
boundary. Connected layers produce 2-D (N, C) tensors; layers that need NCHW reshape them back.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from edgecnn.detection.yolo import RegionDecoder, YoloV1Decoder, YoloV3Decoder
from edgecnn.errors import ModelFormatError
from edgecnn.importers.darknet import emit
from edgecnn.importers.darknet.cfg import Section, excerpt
from edgecnn.importers.darknet.weights import ParamKind, WeightSource
from edgecnn.ir.graph import Node
from edgecnn.limits import Tally

FLOAT_BYTES = 4
ANCHOR_BYTES = 16
"""What one anchor value costs while loading: its slot in a tuple and its text in the metadata."""

BN_EPSILON = 1e-6
"""Darknet's CPU batch norm divides by sqrt(variance) + 1e-6 (not sqrt(variance + eps)); the
importer stores variance' = (sqrt(variance) + 1e-6)^2 - BN_EPSILON so ONNX-style BN matches it."""


@dataclass
class LayerOutput:
    """A layer's result: tensor name and Darknet shape (C, H, W)."""

    tensor: str
    shape: tuple[int, int, int]
    flat: bool = False  # a (N, C) tensor: connected layers and what passes theirs through
    detection: str = ""  # non-empty for detection layers: their decoder's metadata JSON


@dataclass
class LayerContext:
    """What a converter sees: its section, earlier layers' outputs, and where to put nodes."""

    index: int
    section: Section
    layers: list[LayerOutput]
    preceding: LayerOutput
    weights: WeightSource
    input_size: tuple[int, int]  # network input (width, height)
    tally: Tally  # the load's memory: parameters are counted before they are read
    nodes: list[Node] = field(default_factory=list)
    initializers: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def previous(self) -> LayerOutput:
        """The input of layers that read the layer before them."""
        if self.preceding.detection:
            raise self.fail("follows a detection layer, whose output edgecnn does not compute")
        return self.preceding

    @property
    def prefix(self) -> str:
        return f"layer{self.index}.{self.section.kind}"

    def fail(self, message: str, key: str | None = None) -> ModelFormatError:
        return ModelFormatError(f"{self.section.where(key)}: layer {self.index}: {excerpt(message, 300)}")

    def add(self, op: str, suffix: str, inputs: list[str], attrs: object) -> str:
        name = f"{self.prefix}.{suffix}"
        self.nodes.append(Node(op, name, inputs, [name], attrs))
        return name

    def constant(self, suffix: str, value: np.ndarray | np.generic) -> str:
        name = f"{self.prefix}.{suffix}"
        self.initializers[name] = np.asarray(value)
        return name

    def take(self, kind: ParamKind, shape: tuple[int, ...], *, matrix: bool = False) -> np.ndarray:
        self.tally.add(
            FLOAT_BYTES * math.prod(shape), f"layer {self.index} {self.section.label()} {kind.value}"
        )
        return self.weights.take(f"{self.index} [{self.section.kind}]", kind, shape, matrix=matrix)

    def layer_at(self, key: str, value: int) -> LayerOutput:
        """An earlier layer named by a relative (negative) or absolute index."""
        index = self.index + value if value < 0 else value
        if not 0 <= index < self.index:
            raise self.fail(f"refers to layer {value}, which is not an earlier layer", key)
        found = self.layers[index]
        if found.detection:
            raise self.fail(
                f"reads the output of detection layer {index}, which edgecnn does not compute", key
            )
        return found

    def spatial(self, source: LayerOutput) -> str:
        """The tensor of ``source`` as NCHW."""
        if not source.flat:
            return source.tensor
        return emit.reshape(self, "nchw", source.tensor, (0, *source.shape))

    def reject(self, **defaults: float) -> None:
        """Options edgecnn does not implement: an error unless they hold Darknet's default."""
        for key, default in defaults.items():
            if self.section.has(key) and self.section.get_float(key) != default:
                raise self.fail("is not supported by edgecnn", key)


Converter = Callable[[LayerContext], LayerOutput]
CONVERTERS: dict[str, Converter] = {}


def converter(*kinds: str) -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        for kind in kinds:
            CONVERTERS[kind] = fn
        return fn

    return register


def _positive(ctx: LayerContext, key: str, default: int) -> int:
    value = ctx.section.get_int(key, default)
    if value < 1:
        raise ctx.fail(f"must be at least 1, got {value}", key)
    return value


def _read_batch_norm(ctx: LayerContext, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scales = ctx.take(ParamKind.SCALES, (count,))
    mean = ctx.take(ParamKind.ROLLING_MEAN, (count,))
    variance = ctx.take(ParamKind.ROLLING_VARIANCE, (count,))
    if not np.all(variance >= 0):  # also catches NaN
        raise ctx.fail("has negative or NaN rolling variances (do the weights belong to this cfg?)")
    return scales, mean, variance


def _batch_norm(ctx: LayerContext, x: str, biases: np.ndarray, params: tuple[np.ndarray, ...]) -> str:
    scales, mean, variance = params
    adjusted = (np.sqrt(variance.astype(np.float64)) + 1e-6) ** 2 - BN_EPSILON
    names = [ctx.constant(n, v) for n, v in (("scale", scales), ("bias", biases), ("mean", mean))]
    names.append(ctx.constant("var", adjusted.astype(np.float32)))
    return emit.batch_norm(ctx, x, names, BN_EPSILON)


@converter("convolutional")
def convert_convolutional(ctx: LayerContext) -> LayerOutput:
    s = ctx.section
    ctx.reject(dilation=1, binary=0, xnor=0, antialiasing=0, deform=0, dontload=0, dontloadscales=0)
    filters, size, stride = (
        _positive(ctx, "filters", 1),
        _positive(ctx, "size", 1),
        _positive(ctx, "stride", 1),
    )
    groups = _positive(ctx, "groups", 1)
    padding = size // 2 if s.get_bool("pad") else s.get_int("padding", 0)
    channels, height, width = ctx.previous.shape
    if channels % groups or filters % groups:
        raise ctx.fail(f"{channels} input channels and {filters} filters do not split into {groups} groups")
    out_h = (height + 2 * padding - size) // stride + 1
    out_w = (width + 2 * padding - size) // stride + 1
    if padding < 0 or out_h < 1 or out_w < 1:
        raise ctx.fail(f"a {size}x{size} kernel with padding {padding} does not fit a {height}x{width} input")
    batch_normalize = s.get_bool("batch_normalize")
    biases = ctx.take(ParamKind.BIASES, (filters,))
    norm = _read_batch_norm(ctx, filters) if batch_normalize else None
    kernel = ctx.take(ParamKind.WEIGHTS, (filters, channels // groups, size, size))
    inputs = [ctx.spatial(ctx.previous), ctx.constant("W", kernel)]
    if norm is None:
        inputs.append(ctx.constant("B", biases))
    y = emit.conv(ctx, inputs, size, stride, padding, groups)
    if norm is not None:
        y = _batch_norm(ctx, y, biases, norm)
    y = emit.activation(ctx, y, s.get_str("activation", "logistic"))
    return LayerOutput(y, (filters, out_h, out_w))


@converter("connected")
def convert_connected(ctx: LayerContext) -> LayerOutput:
    s = ctx.section
    ctx.reject(dontload=0, dontloadscales=0)
    outputs = _positive(ctx, "output", 1)
    channels, height, width = ctx.previous.shape
    inputs = channels * height * width
    x = ctx.previous.tensor if ctx.previous.flat else emit.flatten(ctx, ctx.previous.tensor)
    biases = ctx.take(ParamKind.BIASES, (outputs,))
    matrix = ctx.take(ParamKind.WEIGHTS, (outputs, inputs), matrix=True)
    norm = _read_batch_norm(ctx, outputs) if s.get_bool("batch_normalize") else None
    gemm_inputs = [x, ctx.constant("W", matrix)]
    if norm is None:
        gemm_inputs.append(ctx.constant("B", biases))
    y = emit.gemm(ctx, gemm_inputs)
    if norm is not None:
        y = _batch_norm(ctx, y, biases, norm)
    y = emit.activation(ctx, y, s.get_str("activation", "logistic"))
    return LayerOutput(y, (outputs, 1, 1), flat=True)


@converter("maxpool")
def convert_maxpool(ctx: LayerContext) -> LayerOutput:
    """Darknet pads ``padding`` (default size-1) in total: padding//2 before, the rest after."""
    s = ctx.section
    ctx.reject(stride_x=0, stride_y=0, maxpool_depth=0, antialiasing=0)
    stride = _positive(ctx, "stride", 1)
    size = _positive(ctx, "size", stride)
    padding = s.get_int("padding", size - 1)
    channels, height, width = ctx.previous.shape
    out_h = (height + padding - size) // stride + 1
    out_w = (width + padding - size) // stride + 1
    before = padding // 2
    if padding < 0 or out_h < 1 or out_w < 1 or before >= size:
        raise ctx.fail(f"a {size}x{size} pool with padding {padding} does not fit a {height}x{width} input")
    y = emit.max_pool(ctx, ctx.spatial(ctx.previous), size, stride, before, padding - before)
    return LayerOutput(y, (channels, out_h, out_w))


@converter("avgpool")
def convert_avgpool(ctx: LayerContext) -> LayerOutput:
    """Darknet's [avgpool] averages each channel over the whole image."""
    y = emit.global_average_pool(ctx, ctx.spatial(ctx.previous))
    return LayerOutput(y, (ctx.previous.shape[0], 1, 1))


@converter("dropout", "cost")
def convert_identity(ctx: LayerContext) -> LayerOutput:
    """Dropout (inference) and cost layers pass their input through."""
    return LayerOutput(ctx.previous.tensor, ctx.previous.shape, ctx.previous.flat)


@converter("softmax")
def convert_softmax(ctx: LayerContext) -> LayerOutput:
    """Softmax over each of ``groups`` equal runs of the flattened C*H*W input."""
    s = ctx.section
    ctx.reject(spatial=0, tree=0)
    groups = _positive(ctx, "groups", 1)
    temperature = s.get_float("temperature", 1.0)
    source = ctx.previous
    total = math.prod(source.shape)
    if total % groups or temperature <= 0:
        raise ctx.fail(f"cannot split {total} inputs into {groups} groups at temperature {temperature}")
    x = source.tensor
    if temperature != 1.0:
        x = emit.binary(ctx, "Mul", "temperature", x, ctx.constant("inv_t", np.float32(1 / temperature)))
    if source.flat and groups == 1:
        return LayerOutput(emit.softmax(ctx, x), source.shape, flat=True)
    grouped = emit.reshape(ctx, "groups", x, (0, groups, total // groups))
    y = emit.softmax(ctx, grouped)
    back = (0, source.shape[0]) if source.flat else (0, *source.shape)
    return LayerOutput(emit.reshape(ctx, "out", y, back), source.shape, source.flat)


@converter("route")
def convert_route(ctx: LayerContext) -> LayerOutput:
    """Concatenate earlier layers' channels; with groups, take channel group ``group_id`` of each."""
    s = ctx.section
    groups = _positive(ctx, "groups", 1)
    group_id = s.get_int("group_id", 0)
    if not 0 <= group_id < groups:
        raise ctx.fail(f"group_id {group_id} is not in [0, {groups})", "group_id")
    sources = [ctx.layer_at("layers", v) for v in s.get_ints("layers")]
    flat = all(src.flat for src in sources)
    first_hw = sources[0].shape[1:]
    parts: list[str] = []
    channels = 0
    for i, src in enumerate(sources):
        if src.shape[1:] != first_hw:
            raise ctx.fail(f"joins layers of sizes {first_hw} and {src.shape[1:]}", "layers")
        if src.shape[0] % groups:
            raise ctx.fail(f"{src.shape[0]} channels do not split into {groups} groups", "groups")
        part = src.tensor if flat else ctx.spatial(src)
        width = src.shape[0] // groups
        if groups > 1:
            part = emit.channel_slice(ctx, f"slice{i}", part, width * group_id, width * (group_id + 1))
        parts.append(part)
        channels += width
    y = parts[0] if len(parts) == 1 else emit.concat(ctx, parts)
    return LayerOutput(y, (channels, *first_hw), flat)


@converter("shortcut")
def convert_shortcut(ctx: LayerContext) -> LayerOutput:
    """activation(alpha * previous + beta * layers[from]); both must have the same shape."""
    s = ctx.section
    ctx.reject(weights_type=0)
    sources = s.get_ints("from")
    if len(sources) != 1:
        raise ctx.fail("only one 'from' layer is supported", "from")
    other = ctx.layer_at("from", sources[0])
    if other.shape != ctx.previous.shape:
        raise ctx.fail(f"adds layers of shapes {ctx.previous.shape} and {other.shape}", "from")
    x, y = ctx.spatial(ctx.previous), ctx.spatial(other)
    alpha, beta = s.get_float("alpha", 1.0), s.get_float("beta", 1.0)
    if alpha != 1.0:
        x = emit.binary(ctx, "Mul", "alpha", x, ctx.constant("alpha_value", np.float32(alpha)))
    if beta != 1.0:
        y = emit.binary(ctx, "Mul", "beta", y, ctx.constant("beta_value", np.float32(beta)))
    total = emit.binary(ctx, "Add", "add", x, y)
    return LayerOutput(emit.activation(ctx, total, s.get_str("activation", "linear")), ctx.previous.shape)


@converter("upsample")
def convert_upsample(ctx: LayerContext) -> LayerOutput:
    """Nearest-neighbour upsampling by an integer ``stride``, times ``scale``."""
    s = ctx.section
    stride = _positive(ctx, "stride", 2)
    scale = s.get_float("scale", 1.0)
    y = emit.upsample_nearest(ctx, ctx.spatial(ctx.previous), stride)
    if scale != 1.0:
        y = emit.binary(ctx, "Mul", "scale", y, ctx.constant("scale_value", np.float32(scale)))
    channels, height, width = ctx.previous.shape
    return LayerOutput(y, (channels, height * stride, width * stride))


@converter("reorg", "reorg3d")
def convert_reorg(ctx: LayerContext) -> LayerOutput:
    """Space-to-depth by ``stride``. ``[reorg]`` is Darknet's original permutation: it reads the
    C x H x W input as (C/s², H*s, W*s) and writes blocks of (H, W); ``[reorg3d]`` (AlexeyAB)
    is ONNX SpaceToDepth. Both are one Reshape -> Transpose -> Reshape."""
    ctx.reject(reverse=0, flatten=0, extra=0)
    s = _positive(ctx, "stride", 1)
    channels, height, width = ctx.previous.shape
    if height % s or width % s or (ctx.section.kind == "reorg" and channels % (s * s)):
        raise ctx.fail(f"stride {s} does not divide a {channels}x{height}x{width} input", "stride")
    if ctx.section.kind == "reorg":
        blocks = (0, channels // (s * s), height, s, width, s)
    else:
        blocks = (0, channels, height // s, s, width // s, s)
    x = emit.reshape(ctx, "blocks", ctx.spatial(ctx.previous), blocks)
    x = emit.transpose(ctx, x, (0, 3, 5, 1, 2, 4))
    shape = (channels * s * s, height // s, width // s)
    return LayerOutput(emit.reshape(ctx, "out", x, (0, *shape)), shape)


def _channels_must_be(ctx: LayerContext, expected: int) -> None:
    got = math.prod(ctx.previous.shape)
    if ctx.section.kind == "detection" and got == expected:
        return
    if ctx.section.kind != "detection" and ctx.previous.shape[0] == expected and not ctx.previous.flat:
        return
    what = "values" if ctx.section.kind == "detection" else "channels"
    have = got if ctx.section.kind == "detection" else ctx.previous.shape[0]
    raise ctx.fail(f"expects {expected} input {what} from its options, the previous layer gives {have}")


def _anchors(ctx: LayerContext, num: int) -> tuple[float, ...]:
    """The layer's ``anchors`` (0.5 each by default), at least ``num`` (w, h) pairs, counted in
    the load's memory before a default of ``num`` pairs is made."""
    ctx.tally.add(ANCHOR_BYTES * 2 * num, f"layer {ctx.index} {ctx.section.label('num')}: {num} anchors")
    anchors = ctx.section.get_floats("anchors", (0.5,) * (2 * num))
    if len(anchors) < 2 * num:
        raise ctx.fail(f"needs {2 * num} anchor values, got {len(anchors)}", "anchors")
    return anchors


def _options(section: Section) -> dict[str, str]:
    return {key: value for key, (value, _) in section.options.items()}


@converter("yolo")
def convert_yolo(ctx: LayerContext) -> LayerOutput:
    s = ctx.section
    ctx.reject(new_coords=0)
    num = _positive(ctx, "num", 1)
    classes = _positive(ctx, "classes", 20)
    pairs = len(s.get_floats("anchors")) // 2 if s.has("anchors") else num
    given = s.get_ints("mask") if s.has("mask") else None
    if given is not None and any(not 0 <= m < pairs for m in given):
        raise ctx.fail(f"mask {excerpt(str(given))} does not index the {pairs} anchors", "mask")
    _channels_must_be(ctx, (num if given is None else len(given)) * (classes + 5))
    anchors = _anchors(ctx, num)
    mask = tuple(range(num)) if given is None else given
    decoder = YoloV3Decoder(
        ctx.input_size, anchors=anchors, mask=mask, classes=classes, scale_x_y=s.get_float("scale_x_y", 1.0)
    )
    return LayerOutput(ctx.previous.tensor, ctx.previous.shape, False, decoder.to_metadata(cfg=_options(s)))


@converter("region")
def convert_region(ctx: LayerContext) -> LayerOutput:
    s = ctx.section
    ctx.reject(tree=0, map=0)
    num, classes = _positive(ctx, "num", 1), _positive(ctx, "classes", 20)
    coords = _positive(ctx, "coords", 4)
    if coords < 4:
        raise ctx.fail(f"needs coords >= 4, got {coords}", "coords")
    _channels_must_be(ctx, num * (coords + 1 + classes))
    anchors = _anchors(ctx, num)
    decoder = RegionDecoder(
        ctx.input_size,
        anchors=anchors[: 2 * num],
        num=num,
        classes=classes,
        coords=coords,
        softmax=s.get_bool("softmax"),
    )
    return LayerOutput(
        ctx.previous.tensor, ctx.previous.shape, ctx.previous.flat, decoder.to_metadata(cfg=_options(s))
    )


@converter("detection")
def convert_detection(ctx: LayerContext) -> LayerOutput:
    s = ctx.section
    side, num = _positive(ctx, "side", 7), _positive(ctx, "num", 1)
    classes, coords = _positive(ctx, "classes", 1), s.get_int("coords", 1)
    if coords != 4:
        raise ctx.fail(f"Darknet decodes 4 box coordinates, got coords={coords}", "coords")
    _channels_must_be(ctx, side * side * ((1 + coords) * num + classes))
    decoder = YoloV1Decoder(
        ctx.input_size,
        side=side,
        num=num,
        classes=classes,
        coords=coords,
        sqrt=s.get_bool("sqrt"),
        softmax=s.get_bool("softmax"),
    )
    return LayerOutput(
        ctx.previous.tensor, ctx.previous.shape, ctx.previous.flat, decoder.to_metadata(cfg=_options(s))
    )
