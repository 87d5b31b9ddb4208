"""The networks people deploy now, rebuilt in ONNX with seeded weights for the benchmark zoo.

Each follows its reference implementation's layer structure (torchvision for MobileNetV3, EfficientNet,
RegNetY and ConvNeXt; PaddleClas for PP-LCNet; Ultralytics for the YOLOv8n-style detector) and the
operators their ONNX exports contain at opset 17: HardSwish/HardSigmoid, SiLU as Sigmoid*Mul,
GELU in its Erf form, squeeze-and-excitation as GlobalAveragePool -> 1x1 -> act -> 1x1 -> gate ->
Mul, LayerNormalization over channels-last tensors, Split/Concat, nearest Resize, max-pool chains.
"""

from __future__ import annotations

import numpy as np

from edgecnn.bench.builder import INPUT_NAME, Chw, NetBuilder, Scale


def make_divisible(value: float, divisor: int = 8) -> int:
    """Channels rounded to a multiple of ``divisor``, never below 90% of ``value`` (torchvision's rule)."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


MOBILENET_V3_LARGE = (
    # kernel, expanded, out, squeeze-excite, activation, stride
    (3, 16, 16, False, "relu", 1),
    (3, 64, 24, False, "relu", 2),
    (3, 72, 24, False, "relu", 1),
    (5, 72, 40, True, "relu", 2),
    (5, 120, 40, True, "relu", 1),
    (5, 120, 40, True, "relu", 1),
    (3, 240, 80, False, "hardswish", 2),
    (3, 200, 80, False, "hardswish", 1),
    (3, 184, 80, False, "hardswish", 1),
    (3, 184, 80, False, "hardswish", 1),
    (3, 480, 112, True, "hardswish", 1),
    (3, 672, 112, True, "hardswish", 1),
    (5, 672, 160, True, "hardswish", 2),
    (5, 960, 160, True, "hardswish", 1),
    (5, 960, 160, True, "hardswish", 1),
)


def mobilenet_v3_large(b: NetBuilder, s: Scale) -> str:
    """MobileNetV3-Large: HardSwish, squeeze-and-excitation with HardSigmoid, 3x3/5x5 depthwise, 224x224."""
    x = b.conv(INPUT_NAME, s.ch(16, 8), 3, 2, pad=1, bn=True, act="hardswish")
    for kernel, expanded, out, excite, act, stride in MOBILENET_V3_LARGE:
        inner, out = s.ch(expanded, 8), s.ch(out, 8)
        y = x if inner == b.shapes[x].channels else b.conv(x, inner, 1, bn=True, act=act)
        y = b.conv(y, inner, kernel, stride, pad=kernel // 2, group=inner, bn=True, act=act)
        if excite:
            y = b.squeeze_excite(y, make_divisible(inner / 4), "relu", "hardsigmoid")
        y = b.conv(y, out, 1, bn=True, act=None)
        x = b.add(x, y) if stride == 1 and b.shapes[x].channels == out else y
    x = b.conv(x, s.ch(960, 8), 1, bn=True, act="hardswish")
    x = b.fc(b.global_pool(x), s.ch(1280, 8), act="hardswish")
    return b.fc(b.dropout(x), 1000)


EFFICIENTNET_B0 = (
    # expansion, kernel, stride, out, layers
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
)


def efficientnet_b0(b: NetBuilder, s: Scale) -> str:
    """EfficientNet-B0: MBConv blocks with SiLU, squeeze-and-excitation (Sigmoid), 5x5 depthwise, 224x224."""
    x = b.conv(INPUT_NAME, s.ch(32, 8), 3, 2, pad=1, bn=True, act="silu")
    for expansion, kernel, first_stride, out, layers in EFFICIENTNET_B0:
        out = s.ch(out, 8)
        for i in range(layers):
            stride = first_stride if i == 0 else 1
            channels = b.shapes[x].channels
            inner = channels * expansion
            y = b.conv(x, inner, 1, bn=True, act="silu") if expansion != 1 else x
            y = b.conv(y, inner, kernel, stride, pad=kernel // 2, group=inner, bn=True, act="silu")
            y = b.squeeze_excite(y, max(1, channels // 4), "silu", "sigmoid")
            y = b.conv(y, out, 1, bn=True, act=None)
            x = b.add(x, y) if stride == 1 and channels == out else y
    x = b.conv(x, s.ch(1280, 8), 1, bn=True, act="silu")
    return b.fc(b.dropout(b.global_pool(x)), 1000)


PP_LCNET = (
    # kernel, out, stride, squeeze-excite (the first block takes the stem's 16 channels)
    (3, 32, 1, False),
    (3, 64, 2, False),
    (3, 64, 1, False),
    (3, 128, 2, False),
    (3, 128, 1, False),
    (3, 256, 2, False),
    *[(5, 256, 1, False)] * 5,
    (5, 512, 2, True),
    (5, 512, 1, True),
)


def pp_lcnet(b: NetBuilder, s: Scale) -> str:
    """PP-LCNet x1.0: depthwise-separable blocks with HardSwish, 3x3/5x5 depthwise, SE in the last two, 224x224."""
    x = b.conv(INPUT_NAME, s.ch(16, 8), 3, 2, pad=1, bn=True, act="hardswish")
    for kernel, out, stride, excite in PP_LCNET:
        channels = b.shapes[x].channels
        x = b.conv(x, channels, kernel, stride, pad=kernel // 2, group=channels, bn=True, act="hardswish")
        if excite:
            x = b.squeeze_excite(x, channels // 4, "relu", "hardsigmoid")
        x = b.conv(x, s.ch(out, 8), 1, bn=True, act="hardswish")
    x = b.conv(b.global_pool(x), s.ch(1280, 8), 1, act="hardswish")
    return b.fc(b.dropout(x), 1000)


REGNET_Y_400MF = ((48, 1), (104, 3), (208, 6), (440, 6))  # (width, depth) per stage
REGNET_GROUP_WIDTH = 8


def regnet_y_400mf(b: NetBuilder, s: Scale) -> str:
    """RegNetY-400MF: residual bottlenecks with grouped 3x3 convs (group width 8) and SE, 224x224."""
    x = b.conv(INPUT_NAME, s.ch(32, 8), 3, 2, pad=1, bn=True)
    for width, depth in REGNET_Y_400MF:
        out = s.ch(width, REGNET_GROUP_WIDTH)
        for i in range(depth):
            stride = 2 if i == 0 else 1
            channels = b.shapes[x].channels
            shortcut = x if stride == 1 and channels == out else b.conv(x, out, 1, stride, bn=True, act=None)
            y = b.conv(x, out, 1, bn=True)
            y = b.conv(y, out, 3, stride, pad=1, group=out // REGNET_GROUP_WIDTH, bn=True)
            y = b.squeeze_excite(y, max(1, round(0.25 * channels)), "relu", "sigmoid")
            y = b.conv(y, out, 1, bn=True, act=None)
            x = b.act(b.add(shortcut, y), "relu")
    return b.fc(b.global_pool(x), 1000)


CONVNEXT_TINY = ((96, 3), (192, 3), (384, 9), (768, 3))  # (channels, blocks) per stage


def convnext_tiny(b: NetBuilder, s: Scale) -> str:
    """ConvNeXt-Tiny: 7x7 depthwise, LayerNorm over channels (NHWC), MatMul MLP with GELU, layer scale, 224x224."""
    x = b.layernorm_channels(b.conv(INPUT_NAME, s.ch(96, 8), 4, 4, act=None))
    for stage, (channels, blocks) in enumerate(CONVNEXT_TINY):
        channels = s.ch(channels, 8)
        if stage:
            x = b.conv(b.layernorm_channels(x), channels, 2, 2, act=None)
        for _ in range(blocks):
            y = b.conv(x, channels, 7, pad=3, group=channels, act=None)
            y = b.node("Transpose", [y], b.shapes[y], perm=[0, 2, 3, 1])
            y = b.linear_last(b.layernorm_last(y), 4 * channels)
            y = b.linear_last(b.act(y, "gelu"), channels)
            y = b.mul(y, b.const("layer_scale", np.full(channels, 0.1, np.float32)))
            x = b.add(x, b.node("Transpose", [y], b.shapes[x], perm=[0, 3, 1, 2]))
    x = b.layernorm_channels(b.global_pool(x))
    return b.fc(b.flatten(x), 1000)


YOLO_CLASSES = 80
YOLO_REG_MAX = 16  # distribution bins per box side (the head's DFL)
YOLO_STRIDES = (8, 16, 32)


def _c2f(b: NetBuilder, x: str, out: int, blocks: int, shortcut: bool) -> str:
    """YOLOv8's C2f: 1x1 conv, Split in two, a chain of bottlenecks on one half, Concat of all, 1x1 conv."""
    half = out // 2
    parts = b.split_channels(b.conv(x, 2 * half, 1, bn=True, act="silu"), 2)
    y = parts[-1]
    for _ in range(blocks):
        z = b.conv(b.conv(y, half, 3, pad=1, bn=True, act="silu"), half, 3, pad=1, bn=True, act="silu")
        y = b.add(y, z) if shortcut else z
        parts.append(y)
    return b.conv(b.concat(parts), out, 1, bn=True, act="silu")


def _sppf(b: NetBuilder, x: str, out: int) -> str:
    """Spatial pyramid pooling, fast: three chained 5x5 stride-1 max pools, concatenated."""
    y = b.conv(x, b.shapes[x].channels // 2, 1, bn=True, act="silu")
    pools = [y]
    for _ in range(3):
        pools.append(b.pool(pools[-1], "max", 5, 1, pad=2))
    return b.conv(b.concat(pools), out, 1, bn=True, act="silu")


def _anchors(sizes: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Anchor centres (2, A) in grid cells and the stride of each anchor (1, A), level by level."""
    points, strides = [], []
    for (height, width), stride in zip(sizes, YOLO_STRIDES):
        ys, xs = np.meshgrid(np.arange(height) + 0.5, np.arange(width) + 0.5, indexing="ij")
        points.append(np.stack([xs.ravel(), ys.ravel()]))
        strides.append(np.full(height * width, stride))
    return np.concatenate(points, 1).astype(np.float32), np.concatenate(strides)[None].astype(np.float32)


def _yolo_head(b: NetBuilder, levels: list[str], s: Scale) -> str:
    """The anchor-free head: per level a box branch (4 sides x 16 bins) and a class branch, flattened
    and concatenated; DFL (softmax over the bins, their expectation by a fixed 1x1 conv), corners at
    those distances around the anchor points, times the stride; class scores through a sigmoid.
    Returns the [N, 4 + classes, anchors] output."""
    first = b.shapes[levels[0]].channels
    box_ch = s.ch(max(16, first // 4, 4 * YOLO_REG_MAX), 8)
    cls_ch = s.ch(max(first, min(YOLO_CLASSES, 100)), 8)
    outputs = 4 * YOLO_REG_MAX + YOLO_CLASSES
    flat, sizes = [], []
    for x in levels:
        box = b.conv(x, box_ch, 3, pad=1, bn=True, act="silu")
        box = b.conv(b.conv(box, box_ch, 3, pad=1, bn=True, act="silu"), 4 * YOLO_REG_MAX, 1, act=None)
        cls = b.conv(x, cls_ch, 3, pad=1, bn=True, act="silu")
        cls = b.conv(b.conv(cls, cls_ch, 3, pad=1, bn=True, act="silu"), YOLO_CLASSES, 1, act=None)
        level = b.concat([box, cls])
        chw = b.shapes[level]
        sizes.append((chw.height, chw.width))
        flat.append(b.reshape(level, [0, outputs, -1], Chw(outputs, chw.height * chw.width, 0)))
    anchors = sum(h * w for h, w in sizes)
    joined = b.node("Concat", flat, Chw(outputs, anchors, 0), axis=2)
    parts = [Chw(4 * YOLO_REG_MAX, anchors, 0), Chw(YOLO_CLASSES, anchors, 0)]
    box, cls = b.split(joined, [4 * YOLO_REG_MAX, YOLO_CLASSES], 1, parts)
    # DFL: [N, 64, A] -> [N, 4, 16, A] -> [N, 16, 4, A] -> softmax over the bins -> expectation -> [N, 4, A]
    bins = b.reshape(box, [0, 4, YOLO_REG_MAX, -1], Chw(4, YOLO_REG_MAX, anchors))
    bins = b.node("Transpose", [bins], Chw(YOLO_REG_MAX, 4, anchors), perm=[0, 2, 1, 3])
    bins = b.node("Softmax", [bins], b.shapes[bins], axis=1)
    expectation = b.const("dfl", np.arange(YOLO_REG_MAX, dtype=np.float32).reshape(1, YOLO_REG_MAX, 1, 1))
    dist = b.reshape(b.node("Conv", [bins, expectation], Chw(1, 4, anchors)), [0, 4, -1], Chw(4, anchors, 0))
    pair = Chw(2, anchors, 0)
    near, far = b.split(dist, [2, 2], 1, [pair, pair])
    points, strides = _anchors(sizes)
    centres = b.const("anchors", points[None])
    top_left = b.node("Sub", [centres, near], pair)
    bottom_right = b.node("Add", [centres, far], pair)
    middle = b.node("Add", [top_left, bottom_right], pair)
    middle = b.node("Div", [middle, b.const("two", np.array(2.0, np.float32))], pair)
    extent = b.node("Sub", [bottom_right, top_left], pair)
    boxes = b.node("Concat", [middle, extent], Chw(4, anchors, 0), axis=1)
    boxes = b.node("Mul", [boxes, b.const("strides", strides)], b.shapes[boxes])
    scores = b.node("Sigmoid", [cls], b.shapes[cls])
    return b.node("Concat", [boxes, scores], Chw(4 + YOLO_CLASSES, anchors, 0), axis=1)


def yolov8n(b: NetBuilder, s: Scale) -> str:
    """YOLOv8n-style detector: Conv-BN-SiLU, C2f (Split/Concat), SPPF, nearest Resize, anchor-free DFL head, 640x640."""

    def conv(x: str, channels: int) -> str:
        return b.conv(x, s.ch(channels, 8), 3, 2, pad=1, bn=True, act="silu")

    x = conv(conv(INPUT_NAME, 16), 32)
    x = _c2f(b, x, s.ch(32, 8), 1, True)
    p3 = _c2f(b, conv(x, 64), s.ch(64, 8), 2, True)
    p4 = _c2f(b, conv(p3, 128), s.ch(128, 8), 2, True)
    p5 = _sppf(b, _c2f(b, conv(p4, 256), s.ch(256, 8), 1, True), s.ch(256, 8))
    h4 = _c2f(b, b.concat([b.resize_nearest(p5, 2), p4]), s.ch(128, 8), 1, False)
    out3 = _c2f(b, b.concat([b.resize_nearest(h4, 2), p3]), s.ch(64, 8), 1, False)
    out4 = _c2f(b, b.concat([conv(out3, 64), h4]), s.ch(128, 8), 1, False)
    out5 = _c2f(b, b.concat([conv(out4, 128), p5]), s.ch(256, 8), 1, False)
    return _yolo_head(b, [out3, out4, out5], s)
