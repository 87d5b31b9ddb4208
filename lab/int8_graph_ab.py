"""What fold_qdq_ops (or the pass ``--without`` names) is worth on a QDQ model (issue 37): the same
quantize_static model planned with the full pipeline and without that pass (without fold_qdq_ops its
Add, pooling and Concat run in float32 between DequantizeLinear and QuantizeLinear steps; without
fuse_int8_residual each block's QLinearAdd is a step of its own), interleaved with onnxruntime on the QDQ model, by
process CPU time at ``--threads`` (1: no worker spins). Prints each plan's kernel census and
whether each output equals onnxruntime's.

    .venv/bin/python lab/int8_graph_ab.py --models resnet18 --rounds 10
    .venv/bin/python lab/int8_graph_ab.py --models resnet18 resnet50 --without fuse_int8_residual
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from common import machine_line, ort_options
from int8_speed import CALIBRATION, cpu_interleaved, quantized


def census(net: Any, feed: dict[str, np.ndarray]) -> str:
    counts = Counter(f"{s.node.op}:{s.kernel.name}" for s in net.plan_for(feed).steps)
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))


def without_pass(path: Path, threads: int, name: str) -> Any:
    """The model loaded with every pass but ``name``."""
    import edgecnn
    import edgecnn.model
    from edgecnn.passes.pipeline import optimize, pipeline_without

    plain = edgecnn.model.optimize
    edgecnn.model.optimize = partial(optimize, passes=pipeline_without(name))  # type: ignore[assignment]
    try:
        return edgecnn.load(str(path), threads=threads)
    finally:
        edgecnn.model.optimize = plain


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", default=["resnet18"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--without", default="fold_qdq_ops", help="the pass to leave out")
    args = parser.parse_args()

    import onnxruntime as ort

    import edgecnn
    from edgecnn.bench.zoo import default_cache_dir, model_path

    print(machine_line(args.threads))
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            float_path = model_path(name, default_cache_dir())
            spec = onnx.load(str(float_path)).graph.input[0]
            shape = [d.dim_value or 1 for d in spec.type.tensor_type.shape.dim]
            samples = [rng.standard_normal(shape).astype(np.float32) for _ in range(CALIBRATION)]
            qdq_path = quantized(float_path, Path(tmp), samples, spec.name)
            feed = {spec.name: rng.standard_normal(shape).astype(np.float32)}
            nets = {
                f"with {args.without}": edgecnn.load(str(qdq_path), threads=args.threads),
                f"without {args.without}": without_pass(qdq_path, args.threads, args.without),
            }
            session = ort.InferenceSession(
                str(qdq_path), ort_options(args.threads), providers=["CPUExecutionProvider"]
            )
            (expected,) = session.run(None, feed)
            print(f"\n{name}")
            for label, net in nets.items():
                (got,) = net.run(feed).values()
                print(f"  {label}: equal to onnxruntime {np.array_equal(got, expected)}; {census(net, feed)}")
            timers = {label: partial(net.run, feed) for label, net in nets.items()}
            timers["onnxruntime int8"] = partial(session.run, None, feed)
            for label, ms in cpu_interleaved(timers, args.rounds).items():
                print(f"  {label:22s} {ms:8.2f} ms (CPU, median of {args.rounds})")
    print(machine_line(args.threads))


if __name__ == "__main__":
    main()
