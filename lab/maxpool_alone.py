"""SqueezeNet's three float MaxPools (3x3, stride 2, ceil_mode) as one-node models, edgecnn against
onnxruntime, interleaved (issue 36).

lab/step_gap.py times the pools inside the network, where onnxruntime runs them on its NCHWc
blocked layout; this times the same pools alone, NCHW in and out for both engines (outputs checked
equal), so that the two figures separate the kernel from the layout.

    .venv/bin/python lab/maxpool_alone.py [--threads 1] [--rounds 200]
"""

from __future__ import annotations

import argparse
from functools import partial

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from common import interleaved, load_model, machine_line, ort_options

POOLS = ((64, 111), (128, 55), (256, 27))
"""(channels, input side) of SqueezeNet 1.1's pools."""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    print(machine_line(args.threads))
    print("| input | edgecnn ms | onnxruntime ms | ratio |")
    print("|---|---:|---:|---:|")
    for channels, side in POOLS:
        shape = [1, channels, side, side]
        node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
        graph = helper.make_graph(
            [node],
            "pool",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        net = load_model(model, args.threads)
        session = ort.InferenceSession(
            model.SerializeToString(), ort_options(args.threads), providers=["CPUExecutionProvider"]
        )
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(net.run({"x": x})["y"], session.run(None, {"x": x})[0])
        ms = interleaved(
            {"edgecnn": partial(net.run, {"x": x}), "onnxruntime": partial(session.run, None, {"x": x})},
            args.rounds,
        )
        print(
            f"| {tuple(shape)} | {ms['edgecnn']:.3f} | {ms['onnxruntime']:.3f} | {ms['edgecnn'] / ms['onnxruntime']:.2f} |"
        )


if __name__ == "__main__":
    main()
