"""The 8-bit LRN on GoogLeNet's QDQ model (issue 37): the same quantize_static model planned with
the current fold_qdq_ops and with fold_qdq_ops as it was at ``--before`` (a git revision: there the
LRNs ran in float32 between a DequantizeLinear and a QuantizeLinear, the MaxPool after the second
one in float32 too), interleaved with onnxruntime, by process CPU time at ``--threads``; then each
plan's steps summed by kernel (process CPU ms, the median of each step); prints each plan's census and
whether each output equals onnxruntime's.

    .venv/bin/python lab/int8_lrn_ab.py --before 58f4e86 --rounds 10
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from common import machine_line, ort_options, time_steps
from int8_graph_ab import census
from int8_speed import CALIBRATION, cpu_interleaved, quantized

PASS_FILE = "src/edgecnn/passes/fold_qdq_ops.py"


def earlier_pass(revision: str, folder: Path) -> Any:
    """fold_qdq_ops as the file was at ``revision``."""
    path = folder / "fold_qdq_ops_before.py"
    path.write_text(
        subprocess.run(
            ["git", "show", f"{revision}:{PASS_FILE}"], capture_output=True, text=True, check=True
        ).stdout
    )
    spec = importlib.util.spec_from_file_location("fold_qdq_ops_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fold_qdq_ops


def loaded_with(path: Path, threads: int, fold: Any) -> Any:
    """The model loaded with ``fold`` in fold_qdq_ops' place in the pipeline."""
    import edgecnn
    import edgecnn.model
    from edgecnn.passes.pipeline import PIPELINE, optimize

    passes = tuple((name, fold if name == "fold_qdq_ops" else p) for name, p in PIPELINE)
    plain = edgecnn.model.optimize
    edgecnn.model.optimize = partial(optimize, passes=passes)  # type: ignore[assignment]
    try:
        return edgecnn.load(str(path), threads=threads)
    finally:
        edgecnn.model.optimize = plain


def by_kernel(net: Any, feed: dict[str, np.ndarray], rounds: int) -> str:
    """Each kernel's share of a run: the median process CPU time of each of its steps, summed."""
    samples = time_steps(net)
    for _ in range(rounds):
        net.run(feed)
    totals: dict[str, float] = {}
    for label, times in samples.items():
        kernel = label[label.rindex("(") + 1 : -1]
        totals[kernel] = totals.get(kernel, 0.0) + 1e3 * float(np.median([cpu for _, cpu in times]))
    return ", ".join(f"{k} {v:.2f}" for k, v in sorted(totals.items(), key=lambda kv: -kv[1]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", required=True, help="git revision of fold_qdq_ops to compare with")
    parser.add_argument("--models", nargs="+", default=["googlenet"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()

    import onnxruntime as ort

    import edgecnn
    from edgecnn.bench.zoo import default_cache_dir, model_path

    print(machine_line(args.threads))
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        before = earlier_pass(args.before, Path(tmp))
        for name in args.models:
            float_path = model_path(name, default_cache_dir())
            spec = onnx.load(str(float_path)).graph.input[0]
            shape = [d.dim_value or 1 for d in spec.type.tensor_type.shape.dim]
            samples = [rng.standard_normal(shape).astype(np.float32) for _ in range(CALIBRATION)]
            qdq_path = quantized(float_path, Path(tmp), samples, spec.name)
            feed = {spec.name: rng.standard_normal(shape).astype(np.float32)}
            nets = {
                "now": edgecnn.load(str(qdq_path), threads=args.threads),
                f"fold_qdq_ops at {args.before}": loaded_with(qdq_path, args.threads, before),
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
                print(f"  {label:28s} {ms:8.2f} ms (CPU, median of {args.rounds})")
            for label, net in nets.items():
                print(f"  {label} by kernel (CPU ms):", by_kernel(net, feed, args.rounds))
    print(machine_line(args.threads))


if __name__ == "__main__":
    main()
