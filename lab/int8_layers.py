"""Each int8 convolution of a zoo model against onnxruntime's, layer by layer (issue 37).

The model (edgecnn.bench.zoo, seeded weights) is quantised as lab/int8_speed.py does (QDQ,
per-channel s8 weights, u8 activations); edgecnn plans it (fold_qdq: QLinearConv layers). For each
layer on the dot-product kernel (int8_dot_conv), with the layer's own input from a run of the model:

- edgecnn: the kernel's ``run_into`` alone, split into the activation layout (pack_image, every
  stride) and the GEMM with its epilogue (gemm_dot);
- onnxruntime: a one-node QLinearConv model with the same weights, scales, zero points and bias
  (a float-output layer gets y_scale 1, y_zero_point 0: the same GEMM, an 8-bit store); a block's
  last convolution with its residual Add in the epilogue (int8_dot_conv_add, QLinearConvAdd) against
  QLinearConv then com.microsoft QLinearAdd (the ReLU after a ResNet block's Add is implied by its
  output's zero point, and onnxruntime drops it: not timed).

Timed by process CPU time at one thread (numba and onnxruntime), interleaved (one call of each per
round, medians), so that other processes' load costs little; the machine's load average is printed
beside the figures.

    .venv/bin/python lab/int8_layers.py --models resnet18 resnet50 --rounds 15
    .venv/bin/python lab/int8_layers.py --models mobilenetv2 googlenet --rounds 7
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from common import machine_line, ort_options
from int8_speed import CALIBRATION, quantized


class PartTimer:
    """Stands in for threads.call in dot_conv: runs the kernel and adds its CPU ms to ``parts``."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.parts: dict[str, float] = {}

    def __call__(self, kernel: Any, small: bool, *args: Any) -> Any:
        start = time.process_time()
        result = self.call(kernel, small, *args)
        name = getattr(kernel, "__name__", str(kernel))
        self.parts[name] = self.parts.get(name, 0.0) + (time.process_time() - start) * 1e3
        return result


def elem_of(dtype: np.dtype) -> int:
    """The ONNX element type of an 8-bit numpy type."""
    return TensorProto.UINT8 if dtype == np.uint8 else TensorProto.INT8


def ort_layer(node: Any, geometry: tuple, values: list[Any], x: np.ndarray) -> Any:
    """An onnxruntime session of one QLinearConv node with ``node``'s constants, and for a
    QLinearConvAdd the QLinearAdd of its output and the shortcut "s" after it."""
    import onnxruntime as ort

    x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias = values[1:9]
    if y_scale is None:
        y_scale, y_zp = np.float32(1.0), np.zeros((), x.dtype)
    attrs = node.attrs
    consts = {
        "xs": np.asarray(x_scale, np.float32),
        "xz": np.asarray(x_zp),
        "w": w,
        "ws": np.asarray(w_scale, np.float32),
        "wz": np.asarray(w_zp),
        "ys": np.asarray(y_scale, np.float32),
        "yz": np.asarray(y_zp),
    }
    inputs = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias is not None:
        consts["b"] = np.asarray(bias, np.int32)
        inputs.append("b")
    conv = helper.make_node(
        "QLinearConv",
        inputs,
        ["y"],
        kernel_shape=list(w.shape[2:]),
        strides=list(geometry[2:4]),
        pads=list(attrs.pads) or [0, 0, 0, 0],
        dilations=list(geometry[6:8]),
        group=attrs.group,
    )
    elem = elem_of(x.dtype)
    nodes, last, feeds = [conv], "y", [helper.make_tensor_value_info("x", elem, list(x.shape))]
    if node.op == "QLinearConvAdd":
        for key, value in zip(("ss", "sz", "as", "az", "os", "oz"), values[10:16]):
            consts[key] = np.asarray(value)
        own, other = ["y", "as", "az"], ["s", "ss", "sz"]
        pair = own + other if attrs.conv_first else other + own
        nodes.append(helper.make_node("QLinearAdd", [*pair, "os", "oz"], ["z"], domain="com.microsoft"))
        feeds.append(helper.make_tensor_value_info("s", elem_of(consts["oz"].dtype), None))
        last = "z"
    graph = helper.make_graph(
        nodes,
        "layer",
        feeds,
        [helper.make_tensor_value_info(last, elem_of(consts["yz"].dtype), None)],
        [numpy_helper.from_array(v, k) for k, v in consts.items()],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return ort.InferenceSession(model.SerializeToString(), ort_options(1), providers=["CPUExecutionProvider"])


def layers(name: str, rounds: int, folder: Path) -> None:
    import edgecnn
    import edgecnn.kernels.cpu.int8.dot_conv as dot_conv
    from edgecnn.bench.zoo import default_cache_dir, model_path

    rng = np.random.default_rng(0)
    float_path = model_path(name, default_cache_dir())
    model = onnx.load(str(float_path))
    input_name = model.graph.input[0].name
    shape = [d.dim_value or 1 for d in model.graph.input[0].type.tensor_type.shape.dim]
    samples = [rng.standard_normal(shape).astype(np.float32) for _ in range(CALIBRATION)]
    qdq_path = quantized(float_path, folder, samples, input_name)
    net = edgecnn.load(str(qdq_path), threads=1)
    feed = {input_name: rng.standard_normal(shape).astype(np.float32)}
    plan = net.plan_for(feed)
    steps = [s for s in plan.steps if s.kernel.name in ("int8_dot_conv", "int8_dot_conv_add")]
    data = net.run(feed, outputs=sorted({x for s in steps for x in (s.node.inputs[0], *s.node.inputs[9:10])}))
    timer = PartTimer(dot_conv.call)
    dot_conv.call = timer
    fused = sum(s.node.op == "QLinearConvAdd" for s in steps)
    print(
        f"\n{name}: {len(steps)} int8_dot_conv layers, {fused} with the residual Add (CPU ms, 1 thread, median of {rounds})"
    )
    print(
        f"  {'layer':34s} {'shape':24s} {'pack':>6s} {'gemm':>6s} {'total':>6s} {'ort':>6s} {'ratio':>5s} GMAC/s"
    )
    totals = np.zeros(4)
    by_kind: dict[str, np.ndarray] = {}
    for step in steps:
        node = step.node
        types = [plan.types.get(i) if i else None for i in node.inputs]
        values = [plan.constants.get(i) if i else None for i in node.inputs]
        add = node.op == "QLinearConvAdd"
        kernel = (dot_conv.Int8DotConvAddKernel if add else dot_conv.Int8DotConvKernel)(node, types, values)
        x = data[node.inputs[0]]
        rest = [None] * 8 + [data[node.inputs[9]]] if add else []
        feeds = {"x": x, "s": data[node.inputs[9]]} if add else {"x": x}
        session = ort_layer(node, kernel.geometry, values, x)
        out = np.empty(kernel.out_shape, kernel.out_dtype)
        w = values[3]
        assert w is not None
        macs = int(np.prod(kernel.out_shape)) * int(np.prod(w.shape[1:]))
        samples_ms: dict[str, list[float]] = {"pack": [], "gemm": [], "total": [], "ort": []}
        for r in range(rounds + 1):
            timer.parts.clear()
            start = time.process_time()
            kernel.run_into(out, x, *rest)
            total = (time.process_time() - start) * 1e3
            start = time.process_time()
            session.run(None, feeds)
            ort_ms = (time.process_time() - start) * 1e3
            if r == 0:
                continue  # warm-up
            gemm = timer.parts.get("gemm_dot", 0.0)
            samples_ms["gemm"].append(gemm)
            samples_ms["pack"].append(sum(timer.parts.values()) - gemm)
            samples_ms["total"].append(total)
            samples_ms["ort"].append(ort_ms)
        m = {k: float(np.median(v)) for k, v in samples_ms.items()}
        kh, kw, sh = kernel.geometry[:3]
        kind = f"{kh}x{kw}/s{sh}" + ("+add" if add else "")
        label = f"{w.shape[1]}->{w.shape[0]} {kind} {kernel.out_hw[0]}x{kernel.out_hw[1]}"
        row = np.array([m["pack"], m["gemm"], m["total"], m["ort"]])
        totals += row
        by_kind[kind] = by_kind.get(kind, np.zeros(4)) + row
        print(
            f"  {node.name[-34:]:34s} {label:24s} {m['pack']:6.3f} {m['gemm']:6.3f} {m['total']:6.3f} "
            f"{m['ort']:6.3f} {m['total'] / m['ort']:5.2f} {macs / m['total'] / 1e6:6.1f}"
        )
    for kind, row in sorted(by_kind.items()):
        print(
            f"  {kind:8s} pack {row[0]:7.2f} gemm {row[1]:7.2f} total {row[2]:7.2f} ort {row[3]:7.2f} ({row[2] / row[3]:.2f}x)"
        )
    print(
        f"  all      pack {totals[0]:7.2f} gemm {totals[1]:7.2f} total {totals[2]:7.2f} ort {totals[3]:7.2f} "
        f"({totals[2] / totals[3]:.2f}x)"
    )
    dot_conv.call = timer.call


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", default=["resnet18", "resnet50"])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    import numba

    numba.set_num_threads(1)
    print(machine_line(1))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            layers(name, args.rounds, Path(tmp))
    print(machine_line(1))


if __name__ == "__main__":
    main()
