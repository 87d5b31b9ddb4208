"""The residual Add in the convolution's epilogue against the convolution then the Add (issue 37):
for each QLinearConvAdd layer of a zoo model's quantize_static plan, with its own inputs from a run
of the model, the fused kernel (int8_dot_conv_add) against the plain int8_dot_conv kernel followed
by the int8_add kernel on the same operands; outputs asserted equal. Process CPU time at one
thread, interleaved (one call of each per round), medians; the load average printed beside.

    .venv/bin/python lab/int8_residual_ab.py --models resnet18 resnet50 --rounds 15
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

from common import machine_line
from int8_speed import CALIBRATION, quantized


def layers(name: str, rounds: int, folder: Path) -> None:
    import edgecnn
    from edgecnn.bench.zoo import default_cache_dir, model_path
    from edgecnn.ir.graph import Node
    from edgecnn.kernels.cpu.int8.dot_conv import Int8DotConvAddKernel, Int8DotConvKernel
    from edgecnn.kernels.cpu.int8.eltwise import QLinearAddKernel
    from edgecnn.ops.quant import QLinearAddAttrs

    rng = np.random.default_rng(0)
    float_path = model_path(name, default_cache_dir())
    model = onnx.load(str(float_path))
    input_name = model.graph.input[0].name
    shape = [d.dim_value or 1 for d in model.graph.input[0].type.tensor_type.shape.dim]
    samples = [rng.standard_normal(shape).astype(np.float32) for _ in range(CALIBRATION)]
    net = edgecnn.load(str(quantized(float_path, folder, samples, input_name)), threads=1)
    feed = {input_name: rng.standard_normal(shape).astype(np.float32)}
    plan = net.plan_for(feed)
    steps = [s for s in plan.steps if s.kernel.name == "int8_dot_conv_add"]
    data = net.run(feed, outputs=sorted({x for s in steps for x in (s.node.inputs[0], s.node.inputs[9])}))
    print(f"\n{name}: {len(steps)} QLinearConvAdd layers (CPU ms, 1 thread, median of {rounds})")
    print(f"  {'layer':30s} {'shape':22s} {'fused':>7s} {'conv':>7s} {'add':>7s} {'conv+add':>8s}")
    sums = np.zeros(3)
    for step in steps:
        node = step.node
        types = [plan.types.get(i) if i else None for i in node.inputs]
        values = [plan.constants.get(i) if i else None for i in node.inputs]
        fused = Int8DotConvAddKernel(node, types, values)
        conv = Int8DotConvKernel(node, types[:9], values[:9])
        own, other = [9 + 3, 9 + 4], [9, 10, 11]
        order = [-1, *own, *other] if node.attrs.conv_first else [*other, -1, *own]
        add_node = Node(
            "QLinearAdd", "add", ["a"] * 8, ["y"], QLinearAddAttrs("relu" if node.attrs.relu else "none")
        )
        out_type = types[9]
        add = QLinearAddKernel(
            add_node,
            [out_type if i == -1 else types[i] for i in order] + types[14:16],
            [None if i == -1 else values[i] for i in order] + values[14:16],
        )
        x, shortcut = data[node.inputs[0]], data[node.inputs[9]]
        rest = [None] * 8 + [shortcut]
        got, codes, want = (np.empty(fused.out_shape, fused.out_dtype) for _ in range(3))
        times: dict[str, list[float]] = {"fused": [], "conv": [], "add": []}
        for r in range(rounds + 1):
            start = time.process_time()
            fused.run_into(got, x, *rest)
            middle = time.process_time()
            conv.run_into(codes, x)
            after_conv = time.process_time()
            operands = (
                [codes, None, None, shortcut] if node.attrs.conv_first else [shortcut, None, None, codes]
            )
            add.run_into(want, operands[0], *operands[1:])
            end = time.process_time()
            if r:
                times["fused"].append((middle - start) * 1e3)
                times["conv"].append((after_conv - middle) * 1e3)
                times["add"].append((end - after_conv) * 1e3)
        assert np.array_equal(got, want), node.name
        m = {k: float(np.median(v)) for k, v in times.items()}
        w = values[3]
        assert w is not None
        kh, kw, sh = fused.geometry[:3]
        label = f"{w.shape[1]}->{w.shape[0]} {kh}x{kw}/s{sh} {fused.out_hw[0]}x{fused.out_hw[1]}"
        sums += [m["fused"], m["conv"], m["add"]]
        print(
            f"  {node.name[-30:]:30s} {label:22s} {m['fused']:7.3f} {m['conv']:7.3f} {m['add']:7.3f} "
            f"{m['conv'] + m['add']:8.3f}"
        )
    print(f"  all: fused {sums[0]:.2f}, conv {sums[1]:.2f} + add {sums[2]:.2f} = {sums[1] + sums[2]:.2f} ms")


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
