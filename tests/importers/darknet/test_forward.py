"""Darknet models imported by edgecnn against an independent float64 numpy forward pass written
here from Darknet's C formulas (its own cfg parser and weights reader; flat CHW buffers as in
Darknet), on seeded random weights written by edgecnn's writer."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest

import edgecnn
from edgecnn.importers.darknet import write_random_weights

FIXTURES = Path(__file__).parents[2] / "fixtures" / "darknet"
SEED_001_CFG = Path(edgecnn.__file__).parent / "data" / "darknet" / "tiny-yolo-seed001.cfg"


# ------------------------------------------------------------------ the reference implementation
def ref_parse(text: str) -> list[tuple[str, dict[str, str]]]:
    sections: list[tuple[str, dict[str, str]]] = []
    for raw in text.splitlines():
        line = re.sub(r"\s", "", raw)
        if not line or line[0] in "#;":
            continue
        if line[0] == "[":
            sections.append((line[1:-1], {}))
        else:
            key, value = line.split("=", 1)
            sections[-1][1].setdefault(key, value)
    return sections


class RefWeights:
    def __init__(self, data: bytes) -> None:
        major, minor, _ = struct.unpack_from("<3i", data)
        wide = major * 10 + minor >= 2 and major < 1000 and minor < 1000
        self.offset = 20 if wide else 16
        self.data = data

    def read(self, n: int) -> np.ndarray:
        values = np.frombuffer(self.data, "<f4", n, self.offset).astype(np.float64)
        self.offset += 4 * n
        return values


def ref_activate(x: np.ndarray, name: str) -> np.ndarray:
    if name == "linear":
        return x
    if name == "leaky":
        return np.where(x > 0, x, 0.1 * x)
    if name == "relu":
        return x * (x > 0)
    if name == "logistic":
        return 1.0 / (1.0 + np.exp(-x))
    if name == "tanh":
        return np.tanh(x)
    if name == "swish":
        return x / (1.0 + np.exp(-x))
    if name == "mish":
        return x * np.tanh(np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20)))))
    raise AssertionError(name)


def ref_batchnorm(y: np.ndarray, params: tuple[np.ndarray, ...]) -> np.ndarray:
    """Darknet's CPU normalize_cpu + scale_bias on (n, spatial): eps is added to the sqrt."""
    scales, mean, variance = (p[:, None] for p in params)
    return (y - mean) / (np.sqrt(variance) + 0.000001) * scales


def ref_forward(cfg_text: str, weights: bytes, image: np.ndarray) -> list[np.ndarray]:
    """Raw inputs of the detection layers (or the last output), for one CHW image."""
    sections = ref_parse(cfg_text)
    net = sections[0][1]
    c, h, w = int(net["channels"]), int(net["height"]), int(net["width"])
    reader = RefWeights(weights)
    x = image.astype(np.float64).ravel()
    outputs: list[tuple[np.ndarray, tuple[int, int, int]]] = []
    raw: list[np.ndarray] = []
    for kind, o in sections[1:]:
        index = len(outputs)
        if kind == "convolutional":
            n, size, stride = int(o["filters"]), int(o.get("size", 1)), int(o.get("stride", 1))
            groups = int(o.get("groups", 1))
            pad = size // 2 if int(o.get("pad", 0)) else int(o.get("padding", 0))
            oh, ow = (h + 2 * pad - size) // stride + 1, (w + 2 * pad - size) // stride + 1
            bn = int(o.get("batch_normalize", 0)) != 0
            biases = reader.read(n)
            norm = (reader.read(n), reader.read(n), reader.read(n)) if bn else ()
            kernel = reader.read(n * (c // groups) * size * size).reshape(n, c // groups, size, size)
            padded = np.pad(x.reshape(c, h, w), ((0, 0), (pad, pad), (pad, pad)))
            out = np.zeros((n, oh * ow))
            ng, cg = n // groups, c // groups
            for g in range(groups):
                for ky in range(size):
                    for kx in range(size):
                        rows = slice(ky, ky + stride * oh, stride)
                        cols = slice(kx, kx + stride * ow, stride)
                        patch = padded[g * cg : (g + 1) * cg, rows, cols].reshape(cg, -1)
                        out[g * ng : (g + 1) * ng] += kernel[g * ng : (g + 1) * ng, :, ky, kx] @ patch
            out = (ref_batchnorm(out, norm) if bn else out) + biases[:, None]
            x = ref_activate(out, o.get("activation", "logistic")).ravel()
            c, h, w = n, oh, ow
        elif kind == "maxpool":
            stride = int(o.get("stride", 1))
            size = int(o.get("size", stride))
            padding = int(o.get("padding", size - 1))
            oh, ow = (h + padding - size) // stride + 1, (w + padding - size) // stride + 1
            image3 = x.reshape(c, h, w)
            out = np.full((c, oh, ow), -np.finfo(np.float32).max)
            for n_ in range(size):
                for m in range(size):
                    cur_h = -(padding // 2) + np.arange(oh) * stride + n_
                    cur_w = -(padding // 2) + np.arange(ow) * stride + m
                    valid = ((cur_h >= 0) & (cur_h < h))[:, None] & ((cur_w >= 0) & (cur_w < w))[None, :]
                    values = image3[:, cur_h.clip(0, h - 1)][:, :, cur_w.clip(0, w - 1)]
                    out = np.maximum(out, np.where(valid, values, -np.finfo(np.float32).max))
            x, h, w = out.ravel(), oh, ow
        elif kind == "avgpool":
            x, h, w = x.reshape(c, h * w).mean(axis=1), 1, 1
        elif kind == "connected":
            n = int(o["output"])
            biases = reader.read(n)
            matrix = reader.read(n * x.size).reshape(n, x.size)
            y = (matrix @ x)[:, None]
            if int(o.get("batch_normalize", 0)):
                y = ref_batchnorm(y, (reader.read(n), reader.read(n), reader.read(n)))
            x = ref_activate(y + biases[:, None], o.get("activation", "logistic")).ravel()
            c, h, w = n, 1, 1
        elif kind == "route":
            groups, group_id = int(o.get("groups", 1)), int(o.get("group_id", 0))
            parts, c = [], 0
            for ref in (int(v) for v in o["layers"].split(",")):
                flat, (pc, ph, pw) = outputs[ref if ref >= 0 else index + ref]
                part = flat.size // groups
                parts.append(flat[part * group_id : part * (group_id + 1)])
                c, h, w = c + pc // groups, ph, pw
            x = np.concatenate(parts)
        elif kind == "shortcut":
            ref = int(o["from"])
            other = outputs[ref if ref >= 0 else index + ref][0]
            alpha, beta = float(o.get("alpha", 1)), float(o.get("beta", 1))
            x = ref_activate(alpha * x + beta * other, o.get("activation", "linear"))
        elif kind == "upsample":
            s = int(o.get("stride", 2))
            up = x.reshape(c, h, w).repeat(s, axis=1).repeat(s, axis=2)
            x, h, w = up.ravel() * float(o.get("scale", 1)), h * s, w * s
        elif kind in ("reorg", "reorg3d"):
            s = int(o["stride"])
            # Darknet's reorg_cpu(x, w, h, c, batch, stride, forward=0, out): [reorg] passes the
            # input's w, h, c; [reorg3d] (AlexeyAB) passes the output's.
            lw, lh, lc = (w, h, c) if kind == "reorg" else (w // s, h // s, c * s * s)
            k, j, i = np.meshgrid(np.arange(lc), np.arange(lh), np.arange(lw), indexing="ij")
            out_c = lc // (s * s)
            c2, offset = k % out_c, k // out_c
            w2, h2 = i * s + offset % s, j * s + offset // s
            out = np.empty_like(x)
            out[(i + lw * (j + lh * k)).ravel()] = x[(w2 + lw * s * (h2 + lh * s * c2)).ravel()]
            x, c, h, w = out, c * s * s, h // s, w // s
        elif kind == "softmax":
            groups = int(o.get("groups", 1))
            e = np.exp(x.reshape(groups, -1) - x.reshape(groups, -1).max(axis=1, keepdims=True))
            x = (e / e.sum(axis=1, keepdims=True)).ravel()
        elif kind in ("yolo", "region", "detection"):
            raw.append(x.copy())
        elif kind not in ("dropout", "cost"):
            raise AssertionError(f"reference has no [{kind}]")
        outputs.append((x, (c, h, w)))
    assert reader.offset == len(weights), "reference did not consume the whole weights file"
    return raw or [x]


# --------------------------------------------------------------------------- helpers
def with_size(text: str, width: int, height: int) -> str:
    text = re.sub(r"(?m)^\s*width\s*=.*$", f"width={width}", text)
    return re.sub(r"(?m)^\s*height\s*=.*$", f"height={height}", text)


def check_model(tmp_path: Path, cfg_text: str, seed: int = 1, batch: int = 1) -> edgecnn.Model:
    cfg = tmp_path / "net.cfg"
    cfg.write_text(cfg_text)
    weights = tmp_path / "net.weights"
    write_random_weights(cfg, weights, seed=seed)
    model = edgecnn.load(cfg, weights, threads=1)
    spec = model.inputs[0]
    shape = (batch, *spec.shape[1:])
    images = np.random.default_rng(seed).random(shape, np.float32)
    got = model.run({spec.name: images})
    data = weights.read_bytes()
    for b in range(batch):
        expected = ref_forward(cfg_text, data, images[b])
        assert len(expected) == len(model.outputs)
        for out_spec, want in zip(model.outputs, expected):
            have = got[out_spec.name][b]
            assert have.dtype == np.float32
            assert have.size == want.size, (out_spec.name, have.shape, want.size)
            scale = float(np.abs(want).max())
            np.testing.assert_allclose(
                have.ravel(), want, rtol=1e-4, atol=1e-4 * scale, err_msg=out_spec.name
            )
    return model


# ------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("tiny.cfg", 32),
        ("yolov1-tiny.cfg", 64),
        ("yolov2-tiny.cfg", 64),
        ("yolov2-tiny-voc.cfg", 96),
        ("yolov3-tiny.cfg", 64),
    ],
)
def test_fixture_matches_reference(tmp_path: Path, name: str, size: int) -> None:
    check_model(tmp_path, with_size((FIXTURES / name).read_text(), size, size))


def test_seed001_tiny_yolo_matches_reference(tmp_path: Path) -> None:
    model = check_model(tmp_path, with_size(SEED_001_CFG.read_text(), 64, 64))
    assert model.outputs[0].shape[1:] == (1470,)


def test_seed001_native_structure() -> None:
    """At 448x448 the last convolution is 7x7x1024 = 50176 values feeding FC 256 -> 4096 -> 1470."""
    from edgecnn.importers.darknet import load_darknet

    graph = load_darknet(SEED_001_CFG, None, random_seed=0)
    gemm_weights = [graph.initializers[n.inputs[1]].shape for n in graph.nodes if n.op == "Gemm"]
    assert gemm_weights == [(256, 50176), (4096, 256), (1470, 4096)]
    convs = [graph.initializers[n.inputs[1]].shape for n in graph.nodes if n.op == "Conv"]
    assert [s[0] for s in convs] == [16, 32, 64, 128, 256, 512, 1024, 1024, 1024]
    assert graph.inputs[0].shape[1:] == (3, 448, 448)


def test_native_size_tiny_classifier(tmp_path: Path) -> None:
    check_model(tmp_path, (FIXTURES / "tiny.cfg").read_text(), seed=3)


def test_batch_of_two_and_odd_size(tmp_path: Path) -> None:
    text = with_size((FIXTURES / "yolov2-tiny.cfg").read_text(), 96, 64)
    check_model(tmp_path, text, batch=2)


NET = "[net]\nwidth={w}\nheight={h}\nchannels={c}\n"


@pytest.mark.parametrize(
    ("size", "stride", "padding", "in_size"),
    [
        (2, 2, None, 7),
        (2, 1, None, 5),
        (3, 2, None, 7),
        (3, 1, None, 4),
        (3, 2, 0, 9),
        (3, 2, 1, 8),
        (5, 3, None, 13),
    ],
)
def test_darknet_maxpool_padding(
    tmp_path: Path, size: int, stride: int, padding: int | None, in_size: int
) -> None:
    pool = f"[maxpool]\nsize={size}\nstride={stride}\n" + ("" if padding is None else f"padding={padding}\n")
    model = check_model(tmp_path, NET.format(w=in_size, h=in_size, c=2) + pool)
    pad = size - 1 if padding is None else padding
    expected = (in_size + pad - size) // stride + 1
    assert model.outputs[0].shape[2:] == (expected, expected)


@pytest.mark.parametrize("kind", ["reorg", "reorg3d"])
def test_reorg_permutations(tmp_path: Path, kind: str) -> None:
    model = check_model(tmp_path, NET.format(w=6, h=4, c=8) + f"[{kind}]\nstride=2\n")
    assert model.outputs[0].shape[1:] == (32, 2, 3)


def test_reorg_is_not_space_to_depth(tmp_path: Path) -> None:
    """[reorg] keeps Darknet's original permutation, which differs from ONNX SpaceToDepth."""
    cfg = tmp_path / "net.cfg"
    cfg.write_text(NET.format(w=4, h=4, c=4) + "[reorg]\nstride=2\n")
    weights = tmp_path / "net.weights"
    write_random_weights(cfg, weights)
    x = np.arange(64, dtype=np.float32).reshape(1, 4, 4, 4)
    got = edgecnn.load(cfg, weights)(x)
    space_to_depth = x.reshape(1, 4, 2, 2, 2, 2).transpose(0, 3, 5, 1, 2, 4).reshape(1, 16, 2, 2)
    assert not np.array_equal(got, space_to_depth)
    np.testing.assert_array_equal(got[0].ravel(), ref_forward(cfg.read_text(), weights.read_bytes(), x[0])[0])


CONV = "[convolutional]\nfilters={f}\nsize={k}\nstride={s}\npad={p}\nbatch_normalize={bn}\nactivation={a}\n"


@pytest.mark.parametrize("activation", ["linear", "leaky", "relu", "logistic", "tanh", "mish", "swish"])
def test_activations(tmp_path: Path, activation: str) -> None:
    check_model(tmp_path, NET.format(w=5, h=5, c=3) + CONV.format(f=4, k=3, s=1, p=1, bn=0, a=activation))


def test_layer_mix(tmp_path: Path) -> None:
    """Strided and grouped convs, padding= without pad, shortcut with alpha/beta, route groups,
    upsample scale, connected with batch norm, softmax groups, dropout and cost."""
    text = (
        NET.format(w=9, h=7, c=4)
        + CONV.format(f=8, k=3, s=2, p=1, bn=1, a="leaky")
        + "[convolutional]\nfilters=8\nsize=3\nstride=1\npadding=1\ngroups=4\nactivation=linear\n"
        + "[shortcut]\nfrom=-2\nactivation=leaky\nalpha=0.5\nbeta=2\n"
        + "[route]\nlayers=-1,0\ngroups=2\ngroup_id=1\n"
        + "[upsample]\nstride=2\nscale=0.5\n"
        + CONV.format(f=6, k=1, s=1, p=1, bn=1, a="mish")
        + "[maxpool]\nsize=2\nstride=2\n"
        + "[dropout]\nprobability=.5\n"
        + "[connected]\noutput=12\nbatch_normalize=1\nactivation=relu\n"
        + "[connected]\noutput=10\nactivation=linear\n"
        + "[softmax]\ngroups=2\n"
        + "[cost]\n"
    )
    check_model(tmp_path, text)


def test_route_and_yolo_outputs_carry_decoders(tmp_path: Path) -> None:
    from edgecnn.detection.yolo import YoloV3Decoder, decoders_from_metadata

    text = with_size((FIXTURES / "yolov3-tiny.cfg").read_text(), 64, 64)
    model = check_model(tmp_path, text)
    decoders = decoders_from_metadata(model.graph.metadata)
    assert list(decoders) == [spec.name for spec in model.outputs]
    first, second = decoders.values()
    assert isinstance(first, YoloV3Decoder)
    assert first.mask == (3, 4, 5) and second.mask == (0, 1, 2)
    assert first.input_size == (64, 64) and first.classes == 80
    assert first.anchors[:4] == (10, 14, 23, 27)
    assert [spec.shape[1:] for spec in model.outputs] == [(255, 2, 2), (255, 4, 4)]
