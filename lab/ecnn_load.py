"""How long loading a 240 MB AlexNet-sized model takes: .ecnn (memory-mapped) against np.load and ONNX.

Builds BVLC AlexNet's graph with seeded random weights (60,965,224 float32 parameters), saves it as
.ecnn, .npz, one .npy per tensor and .onnx in a temporary folder, and times each loader. Before each
cold run the file's pages are dropped from the page cache with posix_fadvise(DONTNEED), so the
numbers include reading from the disk (as cold as an unprivileged process can make it).

    .venv/bin/python lab/ecnn_load.py            # writes docs/benchmarks/ecnn_load.md
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import edgecnn
from common import drop_from_page_cache
from edgecnn.format import load_ecnn, read_sections, save_ecnn
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops.activation import SoftmaxAttrs
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.norm import LRNAttrs
from edgecnn.ops.pool import MaxPoolAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.ops.shape import FlattenAttrs

# name, (out, in/group, k, k), stride, pad, group; then the fully connected layers
CONVS = [
    ("conv1", (96, 3, 11, 11), 4, 0, 1),
    ("conv2", (256, 48, 5, 5), 1, 2, 2),
    ("conv3", (384, 256, 3, 3), 1, 1, 1),
    ("conv4", (384, 192, 3, 3), 1, 1, 2),
    ("conv5", (256, 192, 3, 3), 1, 1, 2),
]
FCS = [("fc6", (4096, 9216)), ("fc7", (4096, 4096)), ("fc8", (1000, 4096))]


def alexnet(seed: int = 0) -> Graph:
    """BVLC AlexNet (Krizhevsky et al. 2012, as in Caffe's deploy.prototxt) with random weights."""
    rng = np.random.default_rng(seed)
    inits: dict[str, np.ndarray] = {}
    nodes: list[Node] = []
    x = "data"

    def add(op: str, name: str, inputs: list[str], attrs: Any) -> str:
        nodes.append(Node(op, name, inputs, [name], attrs))
        return name

    for name, shape, stride, pad, group in CONVS:
        inits[f"{name}.w"] = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.01)
        inits[f"{name}.b"] = np.zeros(shape[0], np.float32)
        conv = ConvAttrs(shape[2:], (stride, stride), (pad,) * 4, (1, 1), group)
        x = add("Relu", f"{name}.relu", [add("Conv", name, [x, f"{name}.w", f"{name}.b"], conv)], NoAttrs())
        if name in ("conv1", "conv2"):
            x = add("LRN", f"{name}.norm", [x], LRNAttrs(5, 1e-4, 0.75, 1.0))
        if name in ("conv1", "conv2", "conv5"):
            x = add("MaxPool", f"{name}.pool", [x], MaxPoolAttrs((3, 3), (2, 2)))
    x = add("Flatten", "flatten", [x], FlattenAttrs(1))
    for name, shape in FCS:
        inits[f"{name}.w"] = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.01)
        inits[f"{name}.b"] = np.zeros(shape[0], np.float32)
        x = add("Gemm", name, [x, f"{name}.w", f"{name}.b"], GemmAttrs(trans_b=True))
        if name != "fc8":
            x = add("Relu", f"{name}.relu", [x], NoAttrs())
    add("Softmax", "prob", [x], SoftmaxAttrs(axis=1))
    return Graph([TensorSpec("data", "float32", (1, 3, 227, 227))], ["prob"], nodes, inits, name="alexnet")


def to_onnx(graph: Graph) -> Any:
    """The same graph as an ONNX model (opset 21)."""
    import onnx
    from onnx import helper, numpy_helper

    def attrs_of(node: Node) -> dict[str, Any]:
        a = node.attrs
        if node.op == "Conv":
            return {"kernel_shape": a.kernel_shape, "strides": a.strides, "pads": a.pads, "group": a.group}
        if node.op == "MaxPool":
            return {"kernel_shape": a.kernel_shape, "strides": a.strides}
        if node.op == "LRN":
            return {"size": a.size, "alpha": a.alpha, "beta": a.beta, "bias": a.bias}
        if node.op == "Gemm":
            return {"transB": 1}
        if node.op in ("Flatten", "Softmax"):
            return {"axis": a.axis}
        return {}

    onnx_nodes = [helper.make_node(n.op, n.inputs, n.outputs, n.name, **attrs_of(n)) for n in graph.nodes]
    onnx_graph = helper.make_graph(
        onnx_nodes,
        graph.name,
        [helper.make_tensor_value_info("data", onnx.TensorProto.FLOAT, (1, 3, 227, 227))],
        [helper.make_tensor_value_info("prob", onnx.TensorProto.FLOAT, (1, 1000))],
        [numpy_helper.from_array(a, name) for name, a in graph.initializers.items()],
    )
    model = helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def median_ms(run: Callable[[], Any], repeats: int, cold: list[Path] | None = None) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()  # closes the previous run's mappings so their pages can be dropped
        if cold:
            drop_from_page_cache(*cold)
        start = time.perf_counter()
        result = run()
        times.append((time.perf_counter() - start) * 1e3)
        del result
    return statistics.median(times)


def touch_every_page(graph: Graph) -> int:
    """Read one byte of every 4 KiB page of every weight, i.e. fault the whole file in."""
    return sum(int(a.reshape(-1).view(np.uint8)[::4096].sum()) for a in graph.initializers.values())


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        info = ""
    for line in info.splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    if " hypervisor" in info:
        cpu += " (a virtual machine: 'cold' drops the guest's page cache, the host may still cache the file)"
    import onnx

    return (
        f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; Python "
        f"{platform.python_version()}, numpy {np.__version__}, onnx {onnx.__version__}, edgecnn {edgecnn.__version__}; "
        f"load average over the last 5 minutes {os.getloadavg()[1]:.1f} when the page was written (above "
        f"{os.cpu_count()}, the machine was shared with other jobs: times are then noisy and longer)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks/ecnn_load.md"))
    parser.add_argument("--repeats", type=int, default=20, help="runs of each fast loader (median reported)")
    parser.add_argument("--slow-repeats", type=int, default=5, help="runs of loaders that read every byte")
    parser.add_argument("--no-onnx", action="store_true", help="skip the ONNX comparison")
    args = parser.parse_args()

    graph = alexnet()
    params = sum(a.size for a in graph.initializers.values())
    rows: list[tuple[str, str, float]] = []
    with tempfile.TemporaryDirectory(prefix="ecnn_bench_") as tmp:
        folder = Path(tmp)
        ecnn_path, npz_path = folder / "alexnet.ecnn", folder / "alexnet.npz"
        start = time.perf_counter()
        save_ecnn(graph, ecnn_path)
        save_ms = (time.perf_counter() - start) * 1e3
        np.savez(npz_path, **graph.initializers)
        npy_paths = []
        for i, (name, array) in enumerate(graph.initializers.items()):
            npy_paths.append(folder / f"{i}_{name}.npy")
            np.save(npy_paths[-1], array)
        sections = read_sections(ecnn_path)
        n, s = args.repeats, args.slow_repeats
        print(
            f"{params:,} parameters; .ecnn {ecnn_path.stat().st_size / 1e6:.1f} MB, saved in {save_ms:.0f} ms"
        )

        def measure(
            label: str, how: str, run: Callable[[], Any], repeats: int, cold: list[Path] | None
        ) -> None:
            rows.append((label, how, median_ms(run, repeats, cold)))
            print(f"{label:<55} {how:<28} {rows[-1][2]:10.2f} ms")

        def mapped() -> Graph:
            """The weights mapped, not read."""
            return load_ecnn(ecnn_path, verify=False)

        measure("load_ecnn(verify=False)", f"cold, median of {n}", mapped, n, [ecnn_path])
        measure("load_ecnn(verify=False)", f"warm, median of {n}", mapped, n, None)
        measure(
            "load_ecnn(verify=False), then touch every weight page",
            f"cold, median of {s}",
            lambda: touch_every_page(mapped()),
            s,
            [ecnn_path],
        )
        measure(
            "load_ecnn (default: the weights' CRC-32 below 256 MiB)",
            f"cold, median of {s}",
            lambda: load_ecnn(ecnn_path),
            s,
            [ecnn_path],
        )
        measure(
            "load_ecnn(verify=True)",
            f"cold, median of {s}",
            lambda: load_ecnn(ecnn_path, verify=True),
            s,
            [ecnn_path],
        )
        measure(
            "load_ecnn(verify=True)",
            f"warm, median of {s}",
            lambda: load_ecnn(ecnn_path, verify=True),
            s,
            None,
        )
        measure(
            "edgecnn.load (.ecnn -> Model, passes included)",
            f"warm, median of {s}",
            lambda: edgecnn.load(ecnn_path),
            s,
            None,
        )
        measure(
            "np.load(.npz), every array read",
            f"cold, median of {s}",
            lambda: (lambda z: {k: z[k] for k in z.files})(np.load(npz_path)),
            s,
            [npz_path],
        )
        measure(
            "np.load(.npy, mmap_mode='r') x 16 files",
            f"cold, median of {n}",
            lambda: [np.load(p, mmap_mode="r") for p in npy_paths],
            n,
            npy_paths,
        )
        if not args.no_onnx:
            import onnx

            from edgecnn.importers.onnx import load_onnx

            onnx_path = folder / "alexnet.onnx"
            onnx.save(to_onnx(graph), onnx_path)
            del graph
            measure("onnx.load", f"cold, median of {s}", lambda: onnx.load(str(onnx_path)), s, [onnx_path])
            measure(
                "edgecnn load_onnx (.onnx -> Graph)",
                f"cold, median of {s}",
                lambda: load_onnx(onnx_path),
                s,
                [onnx_path],
            )
        size_mb = ecnn_path.stat().st_size / 1e6
    write_report(args.out, params, size_mb, save_ms, sections, rows)


def write_report(out: Path, params: int, size_mb: float, save_ms: float, sections: list, rows: list) -> None:
    lines = [
        "# Loading a 240 MB model: .ecnn against np.load and ONNX",
        "",
        "Produced by `.venv/bin/python lab/ecnn_load.py` (do not edit by hand; rerun it).",
        "",
        f"- Machine: {machine()}.",
        f"- Model: BVLC AlexNet's graph, {params:,} float32 parameters with seeded random values; "
        f".ecnn file {size_mb:.1f} MB, written by `save_ecnn` in {save_ms:.0f} ms.",
        "- Sections: "
        + ", ".join(f"{s.name} at byte {s.offset} ({s.length:,} bytes)" for s in sections)
        + ".",
        "- *cold*: the file's pages were dropped from the page cache (`posix_fadvise(DONTNEED)`) before "
        "each run; *warm*: they were left cached. Times are the median wall-clock time of one call.",
        "",
        "| loader | runs | time (ms) |",
        "|---|---|---:|",
        *[f"| {label} | {how} | {ms:.2f} |" for label, how, ms in rows],
        "",
        "Reading: `load_ecnn(verify=False)` maps the file and reads only the header, the section table and "
        "the GRAPH JSON, so its time does not grow with the weights; the weights are read from the disk when "
        "a kernel first touches them (the 'touch every weight page' row shows that cost once). By default "
        "a file of at most 256 MiB, like this one, also gets one CRC-32 pass over its weights (docs/security.md), "
        "and `verify=True` reads every byte for the CRC-32s and the SHA-256 (see docs/formats/ecnn.md).",
        "",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
