"""MaxPool/AveragePool before and after the separable pool_2d, and against onnxruntime (issue 4).

For every zoo model named: each distinct pooling layer (geometry and input shape, batch 1) is timed
alone with this tree's kernel, with the kernel of ``--base`` (a git revision whose pool2d.py is
loaded from ``git show`` into a module of its own and called through the same Pool2d step) and as a
one-node onnxruntime session; then the whole model with this tree's kernels, with the base's
patched in, and in onnxruntime. Runs alternate (new, base, onnxruntime, new, ...) in one process
and each figure is a median. Writes the tables into docs/tuning.md between its pool markers (or
prints them with --print-only).

    .venv/bin/python benchmarks/pool.py --models googlenet,tiny-yolo,squeezenet1.1,resnet50,resnet18,shufflenetv2 --threads 2
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper
from revisions import import_source, source_at

import edgecnn
from edgecnn.bench.machine import cpu_model
from edgecnn.bench.zoo import MODELS, build_model, default_cache_dir, model_path
from edgecnn.kernels.cpu.pool import steps as pool_step
from edgecnn.kernels.cpu.system.threads import cpu_threads
from edgecnn.ops.pool import MaxPoolAttrs, pool_geometry
from edgecnn.passes.fuse_pool_activation import fuse_pool_activation

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "tuning.md"
BASE = "3997d3d"  # the last commit before the separable pool_2d
POOL_OPS = ("MaxPool", "AveragePool", "FusedMaxPool", "FusedAveragePool")


def base_module(revision: str) -> ModuleType:
    """pool2d.py as it was at ``revision``, imported under a name of its own (kept in the bench cache)."""
    source = source_at(revision, "src/edgecnn/kernels/cpu/pool/loops.py")
    return import_source(f"pool2d_{revision}", source, default_cache_dir() / "pool-base")


@contextlib.contextmanager
def kernels_of(module: ModuleType | None) -> Iterator[None]:
    """Pool2d steps call ``module``'s pool_2d/pool_2d_serial inside the block (None: this tree's)."""
    saved = pool_step.pool_2d, pool_step.pool_2d_serial
    if module is not None:
        pool_step.pool_2d, pool_step.pool_2d_serial = module.pool_2d, module.pool_2d_serial
    try:
        yield
    finally:
        pool_step.pool_2d, pool_step.pool_2d_serial = saved


def ort_session(model: onnx.ModelProto, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry(
        "session.force_spinning_stop", "1"
    )  # as `edgecnn bench`: docs/interleaved.md
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def one_node_model(node: Any, x_shape: tuple[int, ...]) -> onnx.ModelProto:
    """The pooling node (plain MaxPool/AveragePool, pads resolved) as a one-node ONNX model."""
    attrs = node.attrs
    geo = pool_geometry(attrs, x_shape)
    is_max = isinstance(attrs, MaxPoolAttrs)
    settings: dict[str, Any] = {
        "kernel_shape": list(geo.kernel),
        "strides": list(geo.strides),
        "pads": list(geo.pads or ()),
        "dilations": list(geo.dilations),
        "ceil_mode": int(attrs.ceil_mode),
    }
    if not is_max:
        settings["count_include_pad"] = int(attrs.count_include_pad)
    onnx_node = helper.make_node("MaxPool" if is_max else "AveragePool", ["x"], ["y"], **settings)
    graph = helper.make_graph(
        [onnx_node],
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def medians(runs: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median ms of each callable, called in turn ``repeats`` times after one warm-up round; each
    round starts one callable later, so none always follows the same one (onnxruntime's threads,
    a cache another run filled)."""
    for run in runs.values():
        run()
    names = list(runs)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(repeats):
        for k in range(len(names)):
            name = names[(round_ + k) % len(names)]
            start = time.perf_counter()
            runs[name]()
            times[name].append((time.perf_counter() - start) * 1e3)
    return {name: float(np.median(t)) for name, t in times.items()}


def describe(node: Any, x_shape: tuple[int, ...]) -> str:
    geo = pool_geometry(node.attrs, x_shape)
    kind = "max" if isinstance(node.attrs, MaxPoolAttrs) else "avg"
    kernel, strides = "x".join(map(str, geo.kernel)), "x".join(map(str, geo.strides))
    pads = ",".join(map(str, geo.pads or ()))
    ceil = " ceil" if node.attrs.ceil_mode else ""
    return f"{kind} {kernel}/{strides} pads {pads}{ceil}, {x_shape[1]}x{x_shape[2]}x{x_shape[3]}"


def measure_model(
    name: str, base: ModuleType, threads: int, repeats: int, whole_model: bool = True
) -> tuple[list[str], list[str]]:
    """(layer rows, model row) of the tables for zoo model ``name``."""
    model = build_model(name)
    value = model.graph.input[0]
    shape = [d.dim_value or 1 for d in value.type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save(model, str(path))
        net = edgecnn.load(str(path), threads=threads)
    plan = net.plan_for(x)
    layers: dict[str, list[Any]] = {}
    for step in plan.steps:
        if step.node.op in POOL_OPS:
            x_shape = tuple(int(d) for d in plan.types[step.node.inputs[0]].shape)
            key = describe(step.node, x_shape)
            layers.setdefault(key, [step, x_shape, 0])[2] += 1
    rows, totals = [], {"new": 0.0, "base": 0.0, "onnxruntime": 0.0}
    for key, (step, x_shape, count) in layers.items():
        data = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
        kernel = step.kernel.run
        serial = copy.copy(kernel)
        serial.small = True  # the serial twin on the calling thread, whatever the grain says
        out = np.empty(kernel.out_shape, np.float32)
        session = ort_session(one_node_model(step.node, x_shape), threads)

        def run_base(kernel: Any = kernel, out: np.ndarray = out, data: np.ndarray = data) -> None:
            with kernels_of(base):
                kernel.run_into(out, data)

        with cpu_threads(threads):
            times = medians(
                {
                    "new": lambda kernel=kernel, out=out, data=data: kernel.run_into(out, data),
                    "serial": lambda serial=serial, out=out, data=data: serial.run_into(out, data),
                    "base": run_base,
                    "onnxruntime": lambda session=session, data=data: session.run(None, {"x": data}),
                },
                repeats,
            )
        for engine in totals:
            totals[engine] += count * times[engine]
        rows.append(
            f"| {name} | {key} | {count} | {'yes' if kernel.small else 'no'} | {times['base'] * 1e3:.0f} | "
            f"{times['new'] * 1e3:.0f} | {times['serial'] * 1e3:.0f} | {times['onnxruntime'] * 1e3:.0f} | "
            f"{times['new'] / times['onnxruntime']:.2f} |"
        )
    if not whole_model:
        return rows, []
    session = ort_session(model, threads)
    input_name = value.name

    def whole_base() -> None:
        with kernels_of(base):
            net(x)

    whole = medians(
        {
            "new": lambda: net(x),
            "base": whole_base,
            "onnxruntime": lambda: session.run(None, {input_name: x}),
        },
        repeats,
    )
    model_row = (
        f"| {name} | {sum(v[2] for v in layers.values())} | {totals['base']:.3f} | {totals['new']:.3f} | "
        f"{totals['onnxruntime']:.3f} | {whole['base']:.2f} | {whole['new']:.2f} | {whole['onnxruntime']:.2f} |"
    )
    return rows, [model_row]


def ort_call_overhead(threads: int, repeats: int) -> float:
    """Median us of one session.run of a one-node model on 1x1x2x2 (the per-call cost in every
    onnxruntime layer time above)."""
    node = type("N", (), {"attrs": MaxPoolAttrs(kernel_shape=(1, 1))})()
    session = ort_session(one_node_model(node, (1, 1, 2, 2)), threads)
    data = np.zeros((1, 1, 2, 2), np.float32)
    return medians({"ort": lambda: session.run(None, {"x": data})}, repeats)["ort"] * 1e3


def report(
    models: list[str], threads: int, repeats: int, revision: str, whole_model: bool = True
) -> list[str]:
    base = base_module(revision)
    load = os.getloadavg()
    layer_rows, model_rows = [], []
    for name in models:
        rows, model_row = measure_model(name, base, threads, repeats, whole_model)
        layer_rows += rows
        model_rows += model_row
    overhead = ort_call_overhead(threads, repeats)
    load_end = os.getloadavg()
    shared = "shared with other jobs" if max(load[0], load_end[0]) > 0.5 else "quiet"
    return [
        f"Machine: {cpu_model()}, {os.cpu_count()} cores, {shared} (load average {load[0]:.2f} at the start, "
        f"{load_end[0]:.2f} at the end); batch 1, {threads} threads, medians of {repeats} interleaved runs.",
        "",
        f"Command: `.venv/bin/python benchmarks/pool.py --models {','.join(models)} --threads {threads} "
        f"--repeats {repeats} --base {revision}`",
        "",
        "Per model: its pooling steps (each distinct layer timed alone, times its count) and the whole",
        "model, with the pool kernel before (base) and after (new), and onnxruntime.",
        "",
        "| model | pool layers | pools base ms | pools new ms | pools onnxruntime ms | model base ms | "
        "model new ms | model onnxruntime ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *model_rows,
        "",
        f"Per distinct layer (us; onnxruntime's times include its per-call cost, {overhead:.0f} us on a "
        "2x2 input; 'below grain': the step runs on one thread anyway (kernels/cpu/system/threads.py GRAIN); "
        "'new, 1 thread': the serial twin, to judge that grain):",
        "",
        "| model | layer (kernel/stride, pads top,left,bottom,right, C x H x W) | count | below grain | base us | "
        "new us | new, 1 thread us | onnxruntime us | new / onnxruntime |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
        *layer_rows,
    ]


def census() -> list[str]:
    """Which zoo models hold act(pool(x)), as imported and after the default passes (where
    fuse_activation has put activations into the convolutions). Built at width 0.25: the layer
    pattern is the same, the weights are 16x smaller."""
    rows = []
    for name in MODELS:
        net = edgecnn.load(str(model_path(name, default_cache_dir(), width=0.25)))
        pools = sum(node.op in ("MaxPool", "AveragePool") for node in net.graph.nodes)
        imported = len(fuse_pool_activation(net.graph).changes)
        optimized = len(fuse_pool_activation(net.optimized_graph).changes)
        rows.append(f"| {name} | {pools} | {imported} | {optimized} |")
    return [
        "Command: `.venv/bin/python benchmarks/pool.py --census`",
        "",
        "| model | MaxPool/AveragePool layers | act(pool(x)) as imported | act(pool(x)) after the passes |",
        "|---|---:|---:|---:|",
        *rows,
    ]


def fusion_times(threads: int, repeats: int) -> list[str]:
    """pool then ReLU as two steps and as one fused step (fuse_pool_activation), whole two-node
    models run through Model.run with no other passes, interleaved."""
    from edgecnn.ir.graph import Graph, Node, TensorSpec
    from edgecnn.model import Model
    from edgecnn.runtime.options import RuntimeOptions

    cases = [
        (
            (1, 32, 32, 32),
            MaxPoolAttrs(kernel_shape=(3, 3), strides=(2, 2), ceil_mode=True),
        ),  # CIFAR-10 pool1
        ((1, 64, 112, 112), MaxPoolAttrs(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))),
        ((1, 512, 14, 14), MaxPoolAttrs(kernel_shape=(3, 3), pads=(1, 1, 1, 1))),
    ]
    rows = []
    options = RuntimeOptions.resolve(threads=threads, optimize=False)
    for shape, attrs in cases:
        graph = Graph(
            [TensorSpec("x", "float32", shape)],
            ["y"],
            [Node("MaxPool", "pool", ["x"], ["p"], attrs), Node("Relu", "relu", ["p"], ["y"])],
        )
        two, one = Model(graph, options), Model(fuse_pool_activation(graph).graph, options)
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        assert np.array_equal(two.run({"x": x})["y"], one.run({"x": x})["y"])
        times = medians(
            {"two": lambda two=two, x=x: two.run({"x": x}), "one": lambda one=one, x=x: one.run({"x": x})},
            repeats,
        )
        key = describe(Node("MaxPool", "pool", ["x"], ["p"], attrs), shape)
        rows.append(
            f"| {key} + relu | {times['two'] * 1e3:.0f} | {times['one'] * 1e3:.0f} | {times['one'] / times['two']:.2f} |"
        )
    return [
        f"Command: `.venv/bin/python benchmarks/pool.py --fusion --threads {threads} --repeats {repeats}`; "
        f"load average {os.getloadavg()[0]:.2f}.",
        "",
        "| layers | pool, relu: us | fused: us | fused / two steps |",
        "|---|---:|---:|---:|",
        *rows,
    ]


def relu_store() -> list[str]:
    """ns per element of a compiled ReLU over 6272 floats (one chunk of ResNet's pooled planes,
    in L1), in place and into another array: in place, LLVM stores only where the value changes
    (a masked store), which is why pool2d._finish writes from a buffer of its own."""
    import numba

    @numba.njit
    def in_place(values: np.ndarray, repeats: int) -> None:
        zero = np.float32(0.0)
        for _ in range(repeats):
            for i in range(values.shape[0]):
                v = values[i]
                values[i] = zero if v <= zero else v

    @numba.njit
    def into(values: np.ndarray, out: np.ndarray, repeats: int) -> None:
        zero = np.float32(0.0)
        for _ in range(repeats):
            for i in range(values.shape[0]):
                v = values[i]
                out[i] = zero if v <= zero else v

    values = np.random.default_rng(0).standard_normal(6272).astype(np.float32)
    out = np.empty_like(values)
    in_place(values.copy(), 1)
    into(values, out, 1)
    repeats = 2000
    results = medians(
        {
            "in place": lambda: in_place(values.copy(), repeats),
            "into another array": lambda: into(values, out, repeats),
        },
        5,
    )
    return [
        f"ReLU {name}: {ms * 1e6 / repeats / values.size:.2f} ns per element" for name, ms in results.items()
    ]


def _threaded(threads: int, kernel: Callable[..., None], planes: np.ndarray, out: np.ndarray) -> None:
    with cpu_threads(threads):
        kernel(planes, False, out)


def global_times(threads: int, repeats: int) -> list[str]:
    """GlobalAveragePool on the zoo's shapes: pool2d.global_pool as it is (fastmath "reassoc": sums
    split over vector lanes), the same loop compiled without the flag (one add after another), and
    onnxruntime's node; interleaved medians."""
    import numba

    from edgecnn.kernels.cpu.pool.loops import global_pool

    in_order = numba.njit(parallel=True, nogil=True)(global_pool.py_func)
    shapes = {
        "SqueezeNet 1.1": (1, 1000, 13, 13),
        "ResNet-50": (1, 2048, 7, 7),
        "MobileNetV2": (1, 1280, 7, 7),
    }
    rows = []
    for model, shape in shapes.items():
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        planes = x.reshape(shape[0] * shape[1], -1)
        out, base = np.empty(planes.shape[0], np.float32), np.empty(planes.shape[0], np.float32)
        graph = helper.make_graph(
            [helper.make_node("GlobalAveragePool", ["x"], ["y"])],
            "gap",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, (*shape[:2], 1, 1))],
        )
        session = ort_session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), threads)
        with cpu_threads(threads):
            in_order(planes, False, base)
            global_pool(planes, False, out)
            np.testing.assert_allclose(out, base, rtol=1e-5, atol=1e-6)
        runs = {
            "lanes": functools.partial(_threaded, threads, global_pool, planes, out),
            "in order": functools.partial(_threaded, threads, in_order, planes, base),
            "ort": functools.partial(session.run, None, {"x": x}),
        }
        times = medians(runs, repeats)
        rows.append(
            f"| {model} | {'x'.join(map(str, shape[1:]))} | {times['in order'] * 1e3:.0f} | "
            f"{times['lanes'] * 1e3:.0f} | {times['ort'] * 1e3:.0f} |"
        )
    return [
        f"Command: `.venv/bin/python benchmarks/pool.py --global --threads {threads} --repeats {repeats}`; "
        f"load average {os.getloadavg()[0]:.2f}.",
        "",
        "| model | input | sums in order: us | over vector lanes: us | onnxruntime: us |",
        "|---|---|---:|---:|---:|",
        *rows,
    ]


def write_section(lines: list[str], block: str, doc: Path = DOC) -> None:
    """Replace the text between docs/tuning.md's ``pool:<block>`` markers (the rest is other sections')."""
    start, end = f"<!-- pool:{block}:start -->", f"<!-- pool:{block}:end -->"
    text = doc.read_text()
    if start not in text or end not in text:
        raise SystemExit(f"{doc} has no {start} ... {end} markers (section 'Pooling')")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(head + start + "\n" + "\n".join(lines) + "\n" + end + tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", default="googlenet,tiny-yolo,squeezenet1.1,resnet50,resnet18,shufflenetv2"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--base", default=BASE, help="git revision whose pool2d.py is the 'base' kernel")
    parser.add_argument("--print-only", action="store_true", help="print the tables, leave docs/tuning.md")
    parser.add_argument(
        "--layers-only", action="store_true", help="skip the whole models (implies --print-only)"
    )
    parser.add_argument("--census", action="store_true", help="only count act(pool(x)) in the zoo models")
    parser.add_argument("--fusion", action="store_true", help="only time pool + ReLU against the fused step")
    parser.add_argument(
        "--relu-store", action="store_true", help="only time a compiled ReLU in place and not"
    )
    parser.add_argument(
        "--global", dest="global_pool", action="store_true", help="only time GlobalAveragePool's kernel"
    )
    args = parser.parse_args()
    if args.global_pool:
        lines = global_times(args.threads, args.repeats)
        print("\n".join(lines))
        if not args.print_only:
            write_section(lines, "global")
        return
    if args.relu_store:
        print("\n".join(relu_store()))
        return
    if args.fusion:
        lines = fusion_times(args.threads, args.repeats)
        print("\n".join(lines))
        if not args.print_only:
            write_section(lines, "fusion")
        return
    if args.census:
        lines = census()
        print("\n".join(lines))
        if not args.print_only:
            write_section(lines, "census")
        return
    lines = report(args.models.split(","), args.threads, args.repeats, args.base, not args.layers_only)
    print("\n".join(lines))
    if not (args.print_only or args.layers_only):
        write_section(lines, "times")


if __name__ == "__main__":
    main()
