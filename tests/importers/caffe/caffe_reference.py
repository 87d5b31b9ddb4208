"""An independent numpy forward pass of a Caffe net, written from Caffe's layer formulas (loops
over kernel offsets and pooling windows, Caffe's own output-size and clipping rules), to
cross-check what the importer builds out of edgecnn operators."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from edgecnn.importers.caffe import in_test_phase, network_layers
from edgecnn.importers.caffe.reader import blob_to_array, parse_prototxt, read_caffemodel


def pair(p: Any, name: str, default: int) -> tuple[int, int]:
    field = "kernel_size" if name == "kernel" else name
    if p.HasField(f"{name}_h") or p.HasField(f"{name}_w"):
        return getattr(p, f"{name}_h"), getattr(p, f"{name}_w")
    value = getattr(p, field)
    if isinstance(value, int):
        return (value, value) if p.HasField(field) else (default, default)
    values = list(value) or [default]
    return (values[0], values[-1])


def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, p: Any) -> np.ndarray:
    kh, kw = pair(p, "kernel", 0)
    ph, pw = pair(p, "pad", 0)
    sh, sw = pair(p, "stride", 1)
    dh, dw = (list(p.dilation) or [1])[0], (list(p.dilation) or [1])[-1]
    g = p.group
    n, c, h, wd = x.shape
    oh = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
    ow = (wd + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    out = np.zeros((n, w.shape[0], oh, ow))
    cg, og = c // g, w.shape[0] // g
    for gi in range(g):
        xs = xp[:, gi * cg : (gi + 1) * cg]
        ws = w[gi * og : (gi + 1) * og].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                patch = xs[
                    :, :, i * dh : i * dh + sh * (oh - 1) + 1 : sh, j * dw : j * dw + sw * (ow - 1) + 1 : sw
                ]
                out[:, gi * og : (gi + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def deconv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, p: Any) -> np.ndarray:
    kh, kw = pair(p, "kernel", 0)
    ph, pw = pair(p, "pad", 0)
    sh, sw = pair(p, "stride", 1)
    g = p.group
    n, c, h, wd = x.shape
    cg, og = c // g, w.shape[1]
    full = np.zeros((n, og * g, sh * (h - 1) + kh, sw * (wd - 1) + kw))
    for gi in range(g):
        xs = x[:, gi * cg : (gi + 1) * cg].astype(np.float64)
        ws = w[gi * cg : (gi + 1) * cg].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                contribution = np.einsum("nchw,co->nohw", xs, ws[:, :, i, j])
                full[
                    :, gi * og : (gi + 1) * og, i : i + sh * (h - 1) + 1 : sh, j : j + sw * (wd - 1) + 1 : sw
                ] += contribution
    out = full[:, :, ph : full.shape[2] - ph, pw : full.shape[3] - pw]
    if b is not None:
        out = out + b.reshape(1, -1, 1, 1)
    return out


def pool(x: np.ndarray, p: Any) -> np.ndarray:
    n, c, h, w = x.shape
    if p.global_pooling:
        kh, kw, ph, pw, sh, sw = h, w, 0, 0, 1, 1
    else:
        kh, kw = pair(p, "kernel", 0)
        ph, pw = pair(p, "pad", 0)
        sh, sw = pair(p, "stride", 1)
    rounding = math.ceil if p.round_mode == 0 else math.floor
    oh = int(rounding((h + 2 * ph - kh) / sh)) + 1
    ow = int(rounding((w + 2 * pw - kw) / sw)) + 1
    if ph or pw:
        if (oh - 1) * sh >= h + ph:
            oh -= 1
        if (ow - 1) * sw >= w + pw:
            ow -= 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            hs, ws_ = i * sh - ph, j * sw - pw
            he, we = min(hs + kh, h + ph), min(ws_ + kw, w + pw)
            size = (he - hs) * (we - ws_)
            hs, ws_, he, we = max(hs, 0), max(ws_, 0), min(he, h), min(we, w)
            window = x[:, :, hs:he, ws_:we].astype(np.float64)
            out[:, :, i, j] = window.max(axis=(2, 3)) if p.pool == 0 else window.sum(axis=(2, 3)) / size
    return out


def lrn(x: np.ndarray, p: Any) -> np.ndarray:
    n = p.local_size
    half = (n - 1) // 2
    sq = x.astype(np.float64) ** 2
    if p.norm_region == 0:
        padded = np.pad(sq, ((0, 0), (half, half), (0, 0), (0, 0)))
        total = sum(padded[:, i : i + x.shape[1]] for i in range(n))
        return x / (p.k + p.alpha / n * total) ** p.beta
    padded = np.pad(sq, ((0, 0), (0, 0), (half, half), (half, half)))
    total = sum(padded[:, :, i : i + x.shape[2], j : j + x.shape[3]] for i in range(n) for j in range(n))
    return x * (1 + p.alpha / (n * n) * total) ** -p.beta


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def forward(prototxt: str, caffemodel: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every blob of the net after one forward pass (float64)."""
    net = parse_prototxt(Path(prototxt))
    weights = {
        layer.name: [blob_to_array(b, layer.name) for b in layer.message.blobs]
        for layer in network_layers(read_caffemodel(Path(caffemodel)))
    }
    blobs: dict[str, np.ndarray] = {k: v.astype(np.float64) for k, v in feeds.items()}
    for layer in network_layers(net):
        if not in_test_phase(layer.message) or layer.type == "Input":
            continue
        m, t = layer.message, layer.type
        xs = [blobs[b] for b in layer.bottoms]
        x = xs[0]
        blob = weights.get(layer.name, [])
        if t == "Convolution":
            p = m.convolution_param
            y = conv(x, blob[0], blob[1] if p.bias_term else None, p)
        elif t == "Deconvolution":
            p = m.convolution_param
            y = deconv(x, blob[0], blob[1] if p.bias_term else None, p)
        elif t == "InnerProduct":
            p = m.inner_product_param
            flat = x.reshape(x.shape[0], -1)
            wm = (
                blob[0].reshape(-1, flat.shape[1])
                if not p.transpose
                else blob[0].reshape(flat.shape[1], -1).T
            )
            y = flat @ wm.T.astype(np.float64) + (blob[1].ravel() if p.bias_term else 0)
        elif t == "Pooling":
            y = pool(x, m.pooling_param)
        elif t == "ReLU":
            y = np.where(x > 0, x, x * m.relu_param.negative_slope)
        elif t == "PReLU":
            slope = blob[0].reshape(1, -1, *([1] * (x.ndim - 2)))
            y = np.where(x > 0, x, x * slope)
        elif t == "ELU":
            y = np.where(x > 0, x, m.elu_param.alpha * (np.exp(x) - 1))
        elif t == "Sigmoid":
            y = 1 / (1 + np.exp(-x))
        elif t == "TanH":
            y = np.tanh(x)
        elif t == "AbsVal":
            y = np.abs(x)
        elif t == "Power":
            p = m.power_param
            y = (p.shift + p.scale * x) ** p.power
        elif t == "LRN":
            y = lrn(x, m.lrn_param)
        elif t == "Softmax":
            y = softmax(x, m.softmax_param.axis)
        elif t in ("Dropout", "Split"):
            for top in layer.tops:
                blobs[top] = x
            continue
        elif t == "Concat":
            y = np.concatenate(xs, axis=m.concat_param.axis)
        elif t == "Slice":
            p = m.slice_param
            points = list(p.slice_point) or [
                x.shape[p.axis] // len(layer.tops) * i for i in range(1, len(layer.tops))
            ]
            for top, part in zip(layer.tops, np.split(x, points, axis=p.axis)):
                blobs[top] = part
            continue
        elif t == "Eltwise":
            p = m.eltwise_param
            if p.operation == 0:
                y = np.prod(xs, axis=0)
            elif p.operation == 2:
                y = np.max(xs, axis=0)
            else:
                coeff = list(p.coeff) or [1.0] * len(xs)
                y = sum(c * v for c, v in zip(coeff, xs))
        elif t == "BatchNorm":
            factor = 0.0 if blob[2][0] == 0 else 1 / blob[2][0]
            mean = blob[0] * factor
            var = blob[1] * factor
            shape = (1, -1, *([1] * (x.ndim - 2)))
            y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + m.batch_norm_param.eps)
        elif t == "Scale":
            p = m.scale_param
            shape = (1, *blob[0].shape, *([1] * (x.ndim - 1 - blob[0].ndim)))
            y = x * blob[0].reshape(shape) + (blob[1].reshape(shape) if p.bias_term else 0)
        elif t == "Flatten":
            p = m.flatten_param
            end = p.end_axis % x.ndim
            y = x.reshape(*x.shape[: p.axis], -1, *x.shape[end + 1 :])
        elif t == "Reshape":
            dims = [x.shape[i] if d == 0 else d for i, d in enumerate(m.reshape_param.shape.dim)]
            y = x.reshape(dims)
        else:
            raise NotImplementedError(t)
        blobs[layer.tops[0]] = y
    return blobs
