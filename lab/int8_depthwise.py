"""The direct int8 depthwise kernel against the im2col + GEMM one and onnxruntime (issue 37).

MobileNetV2 from the zoo (seeded weights) is quantised as lab/int8_speed.py does (quantize_static,
QDQ, per-channel s8 weights, u8 activations); then at 1 thread, by process CPU time, interleaved
(one call of each per round, medians):

- per depthwise layer of the int8 plan: int8_depthwise (its layout: "planes" plane by plane,
  "lanes" channels-last, "same"/"phased" the float32 plane passes) and int8_im2col_gemm built
  from the same planned node (outputs compared), and onnxruntime running that one QLinearConv
  node alone;
- the whole model: edgecnn float32, edgecnn int8, onnxruntime int8; edgecnn int8 with the old
  depthwise kernel is estimated as the int8 run plus the per-layer differences.

    .venv/bin/python lab/int8_depthwise.py --rounds 10

With ``--before FILE`` (an earlier int8/depthwise.py, e.g. from ``git show REV:src/...``) its
kernel is timed per layer too, interleaved with the others, and its output compared:

    git show HEAD~1:src/edgecnn/kernels/cpu/int8/depthwise.py > /tmp/before_depthwise.py
    .venv/bin/python lab/int8_depthwise.py --rounds 20 --before /tmp/before_depthwise.py
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from common import machine_line, ort_options
from int8_speed import CALIBRATION, cpu_interleaved, quantized


def single_node_session(node: Any, values: list[Any], x: np.ndarray) -> Any:
    """onnxruntime running the planned QLinearConv ``node`` alone (its constants as initializers)."""
    import onnxruntime as ort

    names = ["x"] + [f"c{i}" if v is not None else "" for i, v in enumerate(values) if i > 0]
    initializers = [
        numpy_helper.from_array(np.asarray(v), f"c{i}") for i, v in enumerate(values) if i and v is not None
    ]
    from edgecnn.ops.conv import conv_geometry

    geo = conv_geometry(node.attrs, x.shape, values[3].shape)
    assert geo.pads is not None
    onnx_node = helper.make_node(
        "QLinearConv",
        names,
        ["y"],
        kernel_shape=list(geo.kernel),
        strides=list(geo.strides),
        pads=list(geo.pads),
        dilations=list(geo.dilations),
        group=node.attrs.group,
    )
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph(
        [onnx_node],
        "layer",
        [helper.make_tensor_value_info("x", elem, list(x.shape))],
        [helper.make_tensor_value_info("y", elem, None)],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return ort.InferenceSession(model.SerializeToString(), ort_options(1), providers=["CPUExecutionProvider"])


def earlier_kernel(path: Path) -> Any:
    """The Int8DepthwiseKernel class of an earlier version of the module, loaded under a name of
    its own and without registering its kernel again."""
    import edgecnn.kernels.cpu.selection as selection

    spec = importlib.util.spec_from_file_location("before_int8_depthwise", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # numba's cache looks the module up by name
    register, selection.register = selection.register, lambda *_, **__: None
    try:
        spec.loader.exec_module(module)
    finally:
        selection.register = register
    return module.Int8DepthwiseKernel


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--width", type=float, default=1.0)
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--before", type=Path, help="an earlier int8/depthwise.py to time against")
    args = parser.parse_args()

    import onnxruntime as ort

    import edgecnn
    from edgecnn.bench.zoo import default_cache_dir, model_path
    from edgecnn.kernels.cpu.int8.depthwise import Int8DepthwiseKernel, when_depthwise
    from edgecnn.kernels.cpu.int8.steps import Int8ConvKernel

    before_kernel = earlier_kernel(args.before) if args.before else None
    print(machine_line(1))
    rng = np.random.default_rng(0)
    float_path = model_path("mobilenetv2", default_cache_dir(), args.width, args.resolution)
    model = onnx.load(str(float_path))
    input_name = model.graph.input[0].name
    shape = [d.dim_value or 1 for d in model.graph.input[0].type.tensor_type.shape.dim]
    with tempfile.TemporaryDirectory() as tmp:
        samples = [rng.standard_normal(shape).astype(np.float32) for _ in range(CALIBRATION)]
        qdq_path = quantized(float_path, Path(tmp), samples, input_name)
        x = rng.standard_normal(shape).astype(np.float32)
        feed = {input_name: x}
        net32 = edgecnn.load(str(float_path), threads=1)
        net8 = edgecnn.load(str(qdq_path), threads=1)
        ort8 = ort.InferenceSession(str(qdq_path), ort_options(1), providers=["CPUExecutionProvider"])
        plan = net8.plan_for(feed)
        layers = [s for s in plan.steps if s.kernel.name == "int8_depthwise"]
        print(f"depthwise layers on int8_depthwise: {len(layers)}")
        inputs = net8.run(feed, outputs=[s.node.inputs[0] for s in layers])
        old_total = new_total = ort_total = before_total = 0.0
        for step in layers:
            node = step.node
            types = [plan.types.get(i) if i else None for i in node.inputs]
            values = [plan.constants.get(i) if i else None for i in node.inputs]
            assert when_depthwise(node, types, values)
            new, old = Int8DepthwiseKernel(node, types, values), Int8ConvKernel(node, types, values)
            data = inputs[node.inputs[0]]
            a, b = np.empty(new.out_shape, new.out_dtype), np.empty(new.out_shape, new.out_dtype)
            session = single_node_session(node, values, data)
            # "new" and "before" run one after the other, each after a kernel that read the same
            # input (after "old", whose buffers evict the caches, "new" measured ~20% slow)
            timers = {
                "old": partial(old.run_into, a, data),
                "ort": partial(session.run, None, {"x": data}),
                "new": partial(new.run_into, b, data),
            }
            c = np.empty(new.out_shape, new.out_dtype)
            if before_kernel is not None:
                timers["before"] = partial(before_kernel(node, types, values).run_into, c, data)
            ms = cpu_interleaved(timers, args.rounds)
            assert np.array_equal(a, b), node.name
            if before_kernel is not None:
                assert np.array_equal(c, b), node.name
                before_total += ms["before"]
            (expected,) = session.run(None, {"x": data})
            equal = np.array_equal(b, expected)
            old_total, new_total, ort_total = (
                old_total + ms["old"],
                new_total + ms["new"],
                ort_total + ms["ort"],
            )
            w = values[3]
            assert w is not None
            print(
                f"  {node.name:34s} {tuple(data.shape[1:])!s:16s} s{new.geometry[2]} "
                f"{new.flat or ('lanes' if new.lanes else 'planes'):6s} "
                f"old {ms['old']:7.3f}  new {ms['new']:7.3f}  ort {ms['ort']:7.3f} ms "
                f"({ms['old'] / ms['new']:5.1f}x old, {ms['new'] / ms['ort']:4.2f}x ort; equal ort {equal})"
                + (f"  before {ms['before']:7.3f} ms" if before_kernel is not None else "")
            )
        print(
            f"  depthwise in all: old {old_total:.2f} ms, new {new_total:.2f} ms, onnxruntime {ort_total:.2f} ms"
            + (f", before {before_total:.2f} ms" if before_kernel is not None else "")
        )
        medians = cpu_interleaved(
            {
                "edgecnn float32": partial(net32.run, feed),
                "edgecnn int8": partial(net8.run, feed),
                "onnxruntime int8": partial(ort8.run, None, feed),
            },
            args.rounds,
        )
        for label, value in medians.items():
            print(f"  {label:20s} {value:8.2f} ms (CPU, 1 thread, median of {args.rounds})")
        estimate = medians["edgecnn int8"] + old_total - new_total
        print(f"  edgecnn int8 with the old depthwise kernel (estimated): {estimate:.2f} ms")
        print(
            f"  int8 / float32: {medians['edgecnn int8'] / medians['edgecnn float32']:.2f} "
            f"(old kernel: {estimate / medians['edgecnn float32']:.2f}); "
            f"int8 / onnxruntime int8: {medians['edgecnn int8'] / medians['onnxruntime int8']:.2f}"
        )
    print(machine_line(1))


if __name__ == "__main__":
    main()
