"""The benchmark's model zoo: classic CNNs (and, from modern_nets, the networks deployed now)
rebuilt in ONNX with seeded random weights.

Every builder takes ``width`` (channel multiplier) and ``resolution`` (input side) so tests can
build small variants quickly; the benchmark uses the full-size defaults. Models are written once
to a cache directory and reused (the file name encodes every build parameter).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import onnx

from edgecnn import paths
from edgecnn.bench.builder import INPUT_NAME, Chw, NetBuilder, Scale
from edgecnn.bench.modern_nets import (
    convnext_tiny,
    efficientnet_b0,
    mobilenet_v3_large,
    pp_lcnet,
    regnet_y_400mf,
    yolov8n,
)
from edgecnn.errors import InputError

ZOO_VERSION = 1  # bump when a builder changes, so cached files are rebuilt


def alexnet(b: NetBuilder, s: Scale) -> str:
    """BVLC AlexNet (Caffe's reference): LRN after conv1/conv2, two-group conv2/4/5, 227x227."""
    x = b.conv(INPUT_NAME, s.ch(96, 2), 11, stride=4)
    x = b.pool(b.lrn(x), "max", 3, 2, ceil_mode=True)
    x = b.conv(x, s.ch(256, 2), 5, pad=2, group=2)
    x = b.pool(b.lrn(x), "max", 3, 2, ceil_mode=True)
    x = b.conv(x, s.ch(384, 2), 3, pad=1)
    x = b.conv(x, s.ch(384, 2), 3, pad=1, group=2)
    x = b.conv(x, s.ch(256, 2), 3, pad=1, group=2)
    x = b.pool(x, "max", 3, 2, ceil_mode=True)
    x = b.dropout(b.fc(x, s.ch(4096), "relu"))
    x = b.dropout(b.fc(x, s.ch(4096), "relu"))
    return b.fc(x, 1000)


def _inception(b: NetBuilder, s: Scale, x: str, c1: int, r3: int, c3: int, r5: int, c5: int, pp: int) -> str:
    one = b.conv(x, s.ch(c1), 1)
    three = b.conv(b.conv(x, s.ch(r3), 1), s.ch(c3), 3, pad=1)
    five = b.conv(b.conv(x, s.ch(r5), 1), s.ch(c5), 5, pad=2)
    pool = b.conv(b.pool(x, "max", 3, 1, pad=1), s.ch(pp), 1)
    return b.concat([one, three, five, pool])


def googlenet(b: NetBuilder, s: Scale) -> str:
    """BVLC GoogLeNet (Inception v1) without the training-only auxiliary heads, 224x224."""
    x = b.conv(INPUT_NAME, s.ch(64), 7, stride=2, pad=3)
    x = b.lrn(b.pool(x, "max", 3, 2, ceil_mode=True))
    x = b.conv(b.conv(x, s.ch(64), 1), s.ch(192), 3, pad=1)
    x = b.pool(b.lrn(x), "max", 3, 2, ceil_mode=True)
    x = _inception(b, s, x, 64, 96, 128, 16, 32, 32)
    x = _inception(b, s, x, 128, 128, 192, 32, 96, 64)
    x = b.pool(x, "max", 3, 2, ceil_mode=True)
    for spec in ((192, 96, 208, 16, 48, 64), (160, 112, 224, 24, 64, 64), (128, 128, 256, 24, 64, 64)):
        x = _inception(b, s, x, *spec)
    x = _inception(b, s, x, 112, 144, 288, 32, 64, 64)
    x = _inception(b, s, x, 256, 160, 320, 32, 128, 128)
    x = b.pool(x, "max", 3, 2, ceil_mode=True)
    x = _inception(b, s, x, 256, 160, 320, 32, 128, 128)
    x = _inception(b, s, x, 384, 192, 384, 48, 128, 128)
    return b.fc(b.dropout(b.global_pool(x)), 1000)


def _resnet(b: NetBuilder, s: Scale, blocks: tuple[int, ...], bottleneck: bool) -> str:
    x = b.conv(INPUT_NAME, s.ch(64), 7, stride=2, pad=3, bn=True)
    x = b.pool(x, "max", 3, 2, pad=1)
    expansion = 4 if bottleneck else 1
    for stage, count in enumerate(blocks):
        width = s.ch(64 * 2**stage)
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            if bottleneck:  # torchvision's v1.5: the stride sits on the 3x3
                y = b.conv(x, width, 1, bn=True)
                y = b.conv(y, width, 3, stride, pad=1, bn=True)
                y = b.conv(y, width * expansion, 1, bn=True, act=None)
            else:
                y = b.conv(x, width, 3, stride, pad=1, bn=True)
                y = b.conv(y, width, 3, pad=1, bn=True, act=None)
            shortcut = x
            if stride != 1 or b.shapes[x].channels != width * expansion:
                shortcut = b.conv(x, width * expansion, 1, stride, bn=True, act=None)
            x = b.act(b.add(y, shortcut), "relu")
    return b.fc(b.global_pool(x), 1000)


def resnet18(b: NetBuilder, s: Scale) -> str:
    """ResNet-18 (torchvision layout: conv+BN, basic blocks), 224x224."""
    return _resnet(b, s, (2, 2, 2, 2), bottleneck=False)


def resnet50(b: NetBuilder, s: Scale) -> str:
    """ResNet-50 v1.5 (torchvision layout: bottlenecks, stride on the 3x3), 224x224."""
    return _resnet(b, s, (3, 4, 6, 3), bottleneck=True)


def _fire(b: NetBuilder, s: Scale, x: str, squeeze: int, expand: int) -> str:
    x = b.conv(x, s.ch(squeeze), 1)
    return b.concat([b.conv(x, s.ch(expand), 1), b.conv(x, s.ch(expand), 3, pad=1)])


def squeezenet(b: NetBuilder, s: Scale) -> str:
    """SqueezeNet 1.1: fire modules, a 1x1 classifier conv and global average pooling, 224x224."""
    x = b.conv(INPUT_NAME, s.ch(64), 3, stride=2)
    x = b.pool(x, "max", 3, 2, ceil_mode=True)
    x = _fire(b, s, _fire(b, s, x, 16, 64), 16, 64)
    x = b.pool(x, "max", 3, 2, ceil_mode=True)
    x = _fire(b, s, _fire(b, s, x, 32, 128), 32, 128)
    x = b.pool(x, "max", 3, 2, ceil_mode=True)
    for squeeze, expand in ((48, 192), (48, 192), (64, 256), (64, 256)):
        x = _fire(b, s, x, squeeze, expand)
    x = b.conv(b.dropout(x), 1000, 1)
    return b.flatten(b.global_pool(x))


def mobilenet_v2(b: NetBuilder, s: Scale) -> str:
    """MobileNetV2 1.0: inverted residuals with depthwise 3x3 convs and ReLU6 (Clip), 224x224."""
    x = b.conv(INPUT_NAME, s.ch(32, 8), 3, stride=2, pad=1, bn=True, act="relu6")
    settings = (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    )
    for expand, channels, repeats, first_stride in settings:
        out = s.ch(channels, 8)
        for i in range(repeats):
            stride = first_stride if i == 0 else 1
            inner = b.shapes[x].channels * expand
            y = b.conv(x, inner, 1, bn=True, act="relu6") if expand != 1 else x
            y = b.conv(y, inner, 3, stride, pad=1, group=inner, bn=True, act="relu6")
            y = b.conv(y, out, 1, bn=True, act=None)
            x = b.add(x, y) if stride == 1 and b.shapes[x].channels == out else y
    x = b.conv(x, s.ch(1280, 8), 1, bn=True, act="relu6")
    return b.fc(b.dropout(b.global_pool(x)), 1000)


def _shuffle_block(b: NetBuilder, x: str, out: int, stride: int) -> str:
    half = out // 2
    if stride == 1:
        keep, x2 = b.split_channels(x, 2)
    else:
        keep = b.conv(x, b.shapes[x].channels, 3, 2, pad=1, group=b.shapes[x].channels, bn=True, act=None)
        keep = b.conv(keep, half, 1, bn=True)
        x2 = x
    y = b.conv(x2, half, 1, bn=True)
    y = b.conv(y, half, 3, stride, pad=1, group=half, bn=True, act=None)
    y = b.conv(y, half, 1, bn=True)
    return b.channel_shuffle(b.concat([keep, y]), 2)


def shufflenet_v2(b: NetBuilder, s: Scale) -> str:
    """ShuffleNet v2 x1.0: channel split (Split), depthwise convs, shuffle by Reshape/Transpose, 224x224."""
    x = b.conv(INPUT_NAME, s.ch(24, 2), 3, stride=2, pad=1, bn=True)
    x = b.pool(x, "max", 3, 2, pad=1)
    for channels, repeats in ((116, 4), (232, 8), (464, 4)):
        out = s.ch(channels, 2)
        for i in range(repeats):
            x = _shuffle_block(b, x, out, 2 if i == 0 else 1)
    x = b.conv(x, s.ch(1024), 1, bn=True)
    return b.fc(b.global_pool(x), 1000)


def vgg16(b: NetBuilder, s: Scale) -> str:
    """VGG-16 (configuration D): thirteen 3x3 convs in five blocks, three FC layers, 224x224."""
    x = INPUT_NAME
    for channels, repeats in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(repeats):
            x = b.conv(x, s.ch(channels), 3, pad=1)
        x = b.pool(x, "max", 2, 2)
    x = b.dropout(b.fc(x, s.ch(4096), "relu"))
    x = b.dropout(b.fc(x, s.ch(4096), "relu"))
    return b.fc(x, 1000)


def tiny_yolo(b: NetBuilder, s: Scale) -> str:
    """Seed 001's tiny-YOLO (data/darknet/tiny-yolo-seed001.cfg): 9 leaky convs, 3 FC, 448x448 -> 1470."""
    x = INPUT_NAME
    for i, channels in enumerate((16, 32, 64, 128, 256, 512, 1024, 1024, 1024)):
        x = b.conv(x, s.ch(channels), 3, pad=1, act="leaky")
        if i < 6:
            x = b.pool(x, "max", 2, 2)
    x = b.fc(x, s.ch(256))
    x = b.dropout(b.fc(x, s.ch(4096), "leaky"))
    return b.fc(x, 1470)


def lenet5(b: NetBuilder, s: Scale) -> str:
    """LeNet-5 on 1x28x28 digits: two 5x5 convs with max pooling, FC 120-84-10 (ReLU)."""
    x = b.pool(b.conv(INPUT_NAME, s.ch(6), 5, pad=2), "max", 2, 2)
    x = b.pool(b.conv(x, s.ch(16), 5), "max", 2, 2)
    return b.fc(b.fc(b.fc(x, s.ch(120), "relu"), s.ch(84), "relu"), 10)


@dataclass(frozen=True)
class ZooModel:
    name: str
    build: Callable[[NetBuilder, Scale], str] | None  # None: a bundled file, used as is
    channels: int
    resolution: int
    fixed_batch: int | None = None  # models whose file fixes the batch size
    bundled: str = ""  # path under edgecnn/data for bundled models

    @property
    def description(self) -> str:
        doc = (
            self.build.__doc__ if self.build else "The bundled SimpleCNN face/background classifier."
        ) or ""
        return doc.strip().splitlines()[0]


MODELS: dict[str, ZooModel] = {
    m.name: m
    for m in (
        ZooModel("alexnet", alexnet, 3, 227),
        ZooModel("googlenet", googlenet, 3, 224),
        ZooModel("resnet18", resnet18, 3, 224),
        ZooModel("resnet50", resnet50, 3, 224),
        ZooModel("squeezenet1.1", squeezenet, 3, 224),
        ZooModel("mobilenetv2", mobilenet_v2, 3, 224),
        ZooModel("shufflenetv2", shufflenet_v2, 3, 224),
        ZooModel("vgg16", vgg16, 3, 224),
        ZooModel("tiny-yolo", tiny_yolo, 3, 448),
        ZooModel("lenet5", lenet5, 1, 28),
        ZooModel("simplecnn", None, 3, 128, fixed_batch=1, bundled="simplecnn/face_binary_cls.onnx"),
        ZooModel("mobilenetv3-large", mobilenet_v3_large, 3, 224),
        ZooModel("efficientnet-b0", efficientnet_b0, 3, 224),
        ZooModel("pp-lcnet", pp_lcnet, 3, 224),
        ZooModel("regnety-400mf", regnet_y_400mf, 3, 224),
        ZooModel("convnext-tiny", convnext_tiny, 3, 224),
        ZooModel("yolov8n", yolov8n, 3, 640),
    )
}


def build_model(
    name: str, width: float = 1.0, resolution: int | None = None, seed: int = 0
) -> onnx.ModelProto:
    """The ONNX model ``name`` (see MODELS) with seeded weights; bundled models ignore the scale."""
    entry = zoo_entry(name)
    if entry.build is None:
        return onnx.load(str(bundled_path(entry)))
    side = resolution or entry.resolution
    builder = NetBuilder(name, Chw(entry.channels, side, side), seed)
    model = builder.build(entry.build(builder, Scale(width)))
    onnx.checker.check_model(model, full_check=False)
    return model


def model_path(
    name: str,
    cache_dir: str | os.PathLike[str],
    width: float = 1.0,
    resolution: int | None = None,
    seed: int = 0,
) -> Path:
    """Path of the cached ONNX file for these build parameters, building it on first use."""
    entry = zoo_entry(name)
    if entry.build is None:
        return bundled_path(entry)
    side = resolution or entry.resolution
    path = Path(cache_dir) / f"{name}-w{width:g}-r{side}-s{seed}-v{ZOO_VERSION}.onnx"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        onnx.save(build_model(name, width, resolution, seed), str(partial))
        shutil.move(partial, path)  # atomic within a directory: parallel builders never see half a file
    return path


def zoo_entry(name: str) -> ZooModel:
    try:
        return MODELS[name]
    except KeyError:
        raise InputError(f"unknown benchmark model {name!r}; known: {', '.join(MODELS)}") from None


def bundled_path(entry: ZooModel) -> Path:
    from importlib import resources

    return Path(str(resources.files("edgecnn") / "data" / entry.bundled))


def default_cache_dir() -> Path:
    """Where built benchmark models are cached: ``bench/`` under :func:`edgecnn.paths.cache_dir`."""
    return paths.cache_dir("bench")
