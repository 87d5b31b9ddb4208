"""The 8-bit MaxPool kernel against its previous version and the float32 pool_2d (issue 37).

Every MaxPool layer of the zoo models named (shapes from onnx shape inference), on random uint8
codes and the same values as float32: at 1 thread, by process CPU time, interleaved (one call of
each per round, medians). The previous version is pool.py as of git revision ``--before``, loaded
as a separate module (its kernel registrations left out); outputs of all three are compared.

    .venv/bin/python lab/int8_pool_ab.py --models googlenet tiny-yolo --before HEAD --rounds 30
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import onnx

from common import machine_line
from int8_speed import cpu_interleaved

POOL = "src/edgecnn/kernels/cpu/int8/pool.py"


def previous_pool(revision: str, folder: Path) -> ModuleType:
    """pool.py at ``revision`` as module ``int8_pool_before``, without its register() calls."""
    text = subprocess.run(
        ["git", "show", f"{revision}:{POOL}"], check=True, capture_output=True, text=True
    ).stdout
    path = folder / "int8_pool_before.py"
    path.write_text("\n".join(line for line in text.splitlines() if not line.startswith("register(")) + "\n")
    spec = importlib.util.spec_from_file_location("int8_pool_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["int8_pool_before"] = module
    spec.loader.exec_module(module)
    return module


def max_pools(path: Path) -> list[tuple[str, Any, tuple[int, ...]]]:
    """(name, MaxPoolAttrs, input shape) of each MaxPool node of the model."""
    from edgecnn.ops.pool import MaxPoolAttrs

    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    shapes = {
        v.name: tuple(d.dim_value or 1 for d in v.type.tensor_type.shape.dim)
        for v in [*model.graph.input, *model.graph.value_info]
    }
    found = []
    for node in model.graph.node:
        if node.op_type != "MaxPool":
            continue
        a = {attr.name: onnx.helper.get_attribute_value(attr) for attr in node.attribute}
        attrs = MaxPoolAttrs(
            kernel_shape=tuple(a["kernel_shape"]),
            strides=tuple(a.get("strides", (1, 1))),
            pads=tuple(a.get("pads", (0, 0, 0, 0))),
            dilations=tuple(a.get("dilations", (1, 1))),
            ceil_mode=bool(a.get("ceil_mode", 0)),
        )
        found.append((node.name or node.output[0], attrs, shapes[node.input[0]]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", default=["googlenet", "tiny-yolo"])
    parser.add_argument("--before", default="HEAD")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()

    from edgecnn.bench.zoo import default_cache_dir, model_path
    from edgecnn.ir.graph import Node, TensorType
    from edgecnn.kernels.cpu.int8.pool import MaxPool8Bit
    from edgecnn.kernels.cpu.pool.steps import Pool2d
    from edgecnn.kernels.cpu.system.threads import cpu_threads

    print(machine_line(1))
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp, cpu_threads(1):
        before = previous_pool(args.before, Path(tmp))
        for name in args.models:
            print(f"\n{name}: per MaxPool layer, CPU ms (median of {args.rounds}), 1 thread")
            totals = {"before": 0.0, "after": 0.0, "float32": 0.0}
            for label, attrs, shape in max_pools(model_path(name, default_cache_dir())):
                node = Node("MaxPool", label, ["x"], ["y"], attrs)
                codes = rng.integers(0, 256, shape, dtype=np.uint8)
                floats = codes.astype(np.float32)
                kernels = {
                    "before": before.MaxPool8Bit(node, [TensorType("uint8", shape)], [None]),
                    "after": MaxPool8Bit(node, [TensorType("uint8", shape)], [None]),
                    "float32": Pool2d(node, [TensorType("float32", shape)], [None]),
                }
                outs = {k: kernel(floats if k == "float32" else codes) for k, kernel in kernels.items()}
                same = np.array_equal(outs["before"], outs["after"]) and np.array_equal(
                    outs["after"], outs["float32"].astype(np.uint8)
                )
                timers = {
                    k: partial(kernel, floats if k == "float32" else codes) for k, kernel in kernels.items()
                }
                ms = cpu_interleaved(timers, args.rounds)
                for k, v in ms.items():
                    totals[k] += v
                window, stride = attrs.kernel_shape, attrs.strides
                print(
                    f"  {label:12s} {shape!s:20s} k{window[0]}x{window[1]} s{stride[0]} pads{attrs.pads} "
                    f"ceil {int(attrs.ceil_mode)}: "
                    + ", ".join(f"{k} {v:.3f}" for k, v in ms.items())
                    + f"; equal {same}"
                )
            print("  total: " + ", ".join(f"{k} {v:.2f}" for k, v in totals.items()))
    print(machine_line(1))


if __name__ == "__main__":
    main()
