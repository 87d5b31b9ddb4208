"""The child that runs fuzz cases: one per line of stdin, one JSON result per line of stdout.

A case is a folder holding ``model.<ext>`` and, for Caffe and Darknet, ``weights.<ext>``. The worker
loads it with ``edgecnn.load`` (the budget comes from EDGECNN_MEMORY_LIMIT, which the driver sets),
and if it loads, runs it once on ones. Its address space is capped at its size after warming up
plus ``--cap`` bytes, so a runaway allocation ends in a MemoryError reported as such instead of
taking the machine. Used by lab/fuzz/driver.py and by tests/reliability/test_fuzz_corpus.py.

Usage: worker.py [--cap BYTES]; each input line is a folder's path.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np

FEED_LIMIT = 64 << 20
"""Inputs bigger than this are not fed: the run would measure the harness, not edgecnn."""
SYMBOLIC = 2
"""The size given to symbolic input dimensions (batch)."""


def address_space() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def case_files(folder: Path) -> tuple[Path, Path | None]:
    model = next(folder.glob("model.*"))
    weights = next(folder.glob("weights.*"), None)
    return model, weights


def feeds(model: Any) -> dict[str, np.ndarray] | None:
    """Ones for every input (symbolic dimensions of size 2), or None if they would be too large."""
    result = {}
    for spec in model.inputs:
        shape = [d if isinstance(d, int) else SYMBOLIC for d in (spec.shape or ())]
        if np.dtype(spec.dtype).itemsize * float(np.prod(shape, dtype=np.float64)) > FEED_LIMIT:
            return None
        result[spec.name] = np.ones(shape, spec.dtype)
    return result


def innermost_frame(exc: BaseException) -> str:
    """``file:line in function`` of the deepest frame in edgecnn (else the deepest at all)."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/edgecnn/" in f.filename] or frames
    if not ours:
        return "?"
    frame = ours[-1]
    name = frame.filename.split("/src/", 1)[-1]
    return f"{name}:{frame.lineno} in {frame.name}"


def out_of_memory(exc: BaseException) -> bool:
    """Whether a MemoryError is among the causes of ``exc``: an EdgeCNNError wrapping one (a kernel
    failure) means an allocation went past the cap that the budget should have refused first."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, MemoryError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def run_case(folder: Path) -> dict[str, Any]:
    """Load and run one case; classify what happened."""
    import edgecnn
    from edgecnn.errors import EdgeCNNError

    model_path, weights = case_files(folder)
    start = time.perf_counter()
    stage = "load"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = edgecnn.load(model_path, weights, threads=1)
            stage = "run"
            inputs = feeds(model)
            if inputs is None:
                outcome = "loaded, inputs too large to feed"
            else:
                model.run(inputs)
                outcome = "ran"
        return {"outcome": outcome, "seconds": time.perf_counter() - start}
    except EdgeCNNError as exc:
        return {
            "outcome": "memory" if out_of_memory(exc) else "error",
            "type": type(exc).__name__,
            "stage": stage,
            "message": str(exc)[:300],
            "length": len(str(exc)),
            "where": innermost_frame(exc),
            "seconds": time.perf_counter() - start,
        }
    except (Exception, RecursionError) as exc:  # everything else is what the fuzzer looks for
        return {
            "outcome": "memory" if isinstance(exc, MemoryError) else "crash",
            "type": type(exc).__name__,
            "stage": stage,
            "message": str(exc)[:300],
            "where": innermost_frame(exc),
            "seconds": time.perf_counter() - start,
        }


def warm_up() -> None:
    """Import what every case needs, and plan and run a small CNN once (numba, the CPU runtime and
    the common kernels loaded), so that the address-space cap and each case's peak-RSS growth are
    measured after them: the budget is about a model's memory, not edgecnn's code."""
    import edgecnn
    import edgecnn.importers.caffe
    import edgecnn.importers.darknet
    import edgecnn.importers.onnx  # noqa: F401
    from edgecnn.ir.graph import Graph, Node, TensorSpec
    from edgecnn.model import Model
    from edgecnn.ops.activation import SoftmaxAttrs
    from edgecnn.ops.conv import ConvAttrs
    from edgecnn.ops.dense import GemmAttrs
    from edgecnn.ops.pool import MaxPoolAttrs
    from edgecnn.ops.shape import FlattenAttrs
    from edgecnn.runtime.options import RuntimeOptions

    weights = {"w": np.full((4, 3, 3, 3), 0.1, np.float32), "b": np.zeros(4, np.float32),
               "fc": np.full((10, 64), 0.1, np.float32), "fb": np.zeros(10, np.float32)}  # fmt: skip
    nodes = [
        Node("Conv", "conv", ["x", "w", "b"], ["c"], ConvAttrs(pads=(1, 1, 1, 1))),
        Node("Relu", "relu", ["c"], ["r"]),
        Node("MaxPool", "pool", ["r"], ["p"], MaxPoolAttrs(kernel_shape=(2, 2), strides=(2, 2))),
        Node("Flatten", "flat", ["p"], ["f"], FlattenAttrs()),
        Node("Gemm", "fc", ["f", "fc", "fb"], ["g"], GemmAttrs(trans_b=True)),
        Node("Softmax", "prob", ["g"], ["y"], SoftmaxAttrs()),
    ]
    graph = Graph([TensorSpec("x", "float32", (1, 3, 8, 8))], ["y"], nodes, weights)
    Model(graph, RuntimeOptions.resolve(threads=1)).run({"x": np.ones((1, 3, 8, 8), np.float32)})


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cap", type=int, default=2 << 30, help="bytes of address space above the warm size")
    args = parser.parse_args()
    warm_up()
    limit = address_space() + args.cap
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    print(json.dumps({"ready": True, "cap": limit}), flush=True)
    for line in sys.stdin:
        before = peak_rss()
        result = run_case(Path(line.strip()))
        result["peak_rss_growth"] = peak_rss() - before
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
