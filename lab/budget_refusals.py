"""Time and peak memory of the refusals issue 34 asked for: each hostile input in a fresh child.

Each case is a small file or command line that declares (or asks for) far more memory than the
budget; the child records how it ended, how long it took and its peak resident memory
(getrusage). The refusal must come before the allocation, so the peak stays near the interpreter's
own (numpy, onnx and edgecnn imported).

    .venv/bin/python lab/budget_refusals.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from common import REPO, machine_line
from edgecnn.cli.demo_cmd import bundled

CHILD = """
import json, resource, sys, time
start = time.perf_counter()
outcome = "loaded"
if sys.argv[1] == "load":
    import numpy as np
    import edgecnn
    try:
        model = edgecnn.load(sys.argv[2], threads=1)
        model.run({s.name: np.ones([d if isinstance(d, int) else 1 for d in s.shape], np.float32) for s in model.inputs})
        outcome = "ran"
    except Exception as exc:
        outcome = type(exc).__name__
else:
    from typer.testing import CliRunner
    from edgecnn.cli.app import app
    outcome = f"exit {CliRunner().invoke(app, sys.argv[2:]).exit_code}"
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"outcome": outcome, "seconds": time.perf_counter() - start, "peak_mib": peak}))
"""


def onnx_file(
    path: Path, node: onnx.NodeProto, shape: list[int | str], initializers: list[onnx.TensorProto]
) -> str:
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_empty_tensor_value_info("y")],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def ints(name: str, value: list[int] | int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=np.int64), name)


def cases(folder: Path) -> dict[str, list[str]]:
    ones = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")
    face = str(bundled("simplecnn/face_binary_cls.onnx"))
    jpg = str(bundled("simplecnn/samples/face.jpg"))
    relu = onnx_file(folder / "relu.onnx", helper.make_node("Relu", ["x"], ["y"]), ["n", 1, 28, 28], [])
    return {
        "ONNX ConstantOfShape of 4 PiB": [
            "load",
            onnx_file(
                folder / "cos.onnx",
                helper.make_node("ConstantOfShape", ["s"], ["y"]),
                [1],
                [ints("s", [1 << 20, 1 << 20, 1 << 10])],
            ),
        ],
        "ONNX Range of 32 TiB": [
            "load",
            onnx_file(
                folder / "range.onnx",
                helper.make_node("Range", ["a", "b", "c"], ["y"]),
                [1],
                [ints("a", 0), ints("b", 1 << 42), ints("c", 1)],
            ),
        ],
        "ONNX Tile of 4e13 elements": [
            "load",
            onnx_file(
                folder / "tile.onnx",
                helper.make_node("Tile", ["x", "r"], ["y"]),
                [1, 4],
                [ints("r", [10**7, 10**6])],
            ),
        ],
        "ONNX Conv pads=1e6": [
            "load",
            onnx_file(
                folder / "pads.onnx",
                helper.make_node("Conv", ["x", "w"], ["y"], pads=[10**6] * 4),
                [1, 1, 4, 4],
                [ones],
            ),
        ],
        "run --size 20000x20000 (model declares 128x128)": ["cli", "run", face, jpg, "--size", "20000x20000"],
        "--memory-limit 1G info --shape 1000000x1x28x28": [
            "cli",
            "--memory-limit",
            "1G",
            "info",
            relu,
            "--shape",
            "1000000x1x28x28",
        ],
    }


def main() -> None:
    print(machine_line(threads=1))
    print(f"{'case':<52} {'outcome':<12} {'seconds':>8} {'peak MiB':>9}")
    with tempfile.TemporaryDirectory() as folder:
        for name, args in cases(Path(folder)).items():
            out = subprocess.run(
                [sys.executable, "-c", CHILD, *args], check=True, capture_output=True, text=True, cwd=REPO
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{name:<52} {r['outcome']:<12} {r['seconds']:>8.2f} {r['peak_mib']:>9.0f}")


if __name__ == "__main__":
    main()
