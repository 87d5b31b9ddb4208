"""What the hardening tests share: small ONNX files built by hand, and a child process whose peak
memory is measured (a refusal must come before the allocation, not after it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]


def onnx_file(
    path: Path,
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[tuple[str, list[int]]] = (("x", [1, 4]),),
    initializers: Sequence[onnx.TensorProto] = (),
    opset: int = 17,
) -> Path:
    """A one-graph ONNX file: float inputs of the given shapes, outputs of the last node."""
    graph = helper.make_graph(
        list(nodes),
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_empty_tensor_value_info(o) for o in nodes[-1].output],
        list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def tensor(name: str, value: np.ndarray | list[int] | int) -> onnx.TensorProto:
    array = np.asarray(value, dtype=np.int64) if not isinstance(value, np.ndarray) else value
    return numpy_helper.from_array(array, name)


def run_child(code: str, *args: str, env: dict[str, str] | None = None) -> dict:
    """Run ``code`` (which sets a dict ``result``) in a fresh interpreter; returns ``result`` with
    the child's peak of what Python and numpy allocated, in MiB, under "peak_mb" (tracemalloc), and
    its peak resident memory under "rss_mb". The assertions use the first: on a cold compile cache
    the resident peak is mostly numba's compiler (about 1.7 GB), not anything the input asked for."""
    head = "import tracemalloc\ntracemalloc.start()\n"
    tail = "\nimport json, resource\nresult['peak_mb'] = tracemalloc.get_traced_memory()[1] // (1 << 20)"
    tail += "\nresult['rss_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024"
    tail += "\nprint(json.dumps(result))\n"
    completed = subprocess.run(
        [sys.executable, "-c", head + code + tail, *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **(env or {})},
        cwd=REPO,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


LOAD_AND_RUN = """
import sys
import numpy as np
import edgecnn
outcomes = []
for path in sys.argv[1:]:
    try:
        model = edgecnn.load(path, threads=1)
        feeds = {s.name: np.ones([d if isinstance(d, int) else 1 for d in s.shape], np.float32) for s in model.inputs}
        model.run(feeds)
        outcomes.append({"error": None})
    except Exception as exc:
        outcomes.append({"error": type(exc).__name__, "message": str(exc)})
result = {"outcomes": outcomes}
"""
"""Loads and runs each model file named in argv in one child; ``outcomes`` says how each ended."""
