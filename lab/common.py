"""What the lab's scripts share: zoo inputs and models, onnxruntime set up as `edgecnn bench` sets it,
interleaved timing, the machine line printed beside every table, marked sections of a notes page,
the package at another git revision for child processes, the cores' distance, and the one-operator
table of the device benchmarks. Scripts import from here, never from each other.

Nothing here changes the package's state: a different threshold goes through
`edgecnn.kernels.cpu.tuning_record` (`tuned`, below), never through a patched module global.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

LAB = Path(__file__).resolve().parent
REPO = LAB.parent
NOTES = LAB / "notes"
DOCS = REPO / "docs"
CONV_OPS = ("Conv", "FusedConv")

# ---------------------------------------------------------------------------------------------------
# Models, inputs, onnxruntime


def model_input(model: Any) -> tuple[str, np.ndarray]:
    """The first input's name and a seeded value of its shape (unknown dimensions as 1)."""
    value = model.graph.input[0]
    shape = [d.dim_value or 1 for d in value.type.tensor_type.shape.dim]
    return value.name, np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def load_model(model: Any, threads: int) -> Any:
    """An ONNX ModelProto loaded by edgecnn (through a temporary file) with ``threads`` threads."""
    import onnx

    import edgecnn

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.onnx"
        onnx.save(model, str(path))
        return edgecnn.load(str(path), threads=threads)


def ort_options(threads: int) -> Any:
    """onnxruntime's options as `edgecnn bench` sets them (sequential, all graph optimisations, its
    workers spinning only while a run is under way)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.force_spinning_stop", "1")
    return options


def conv_layers(net: Any, x: np.ndarray) -> list[tuple]:
    """(node, input types, constant values, chosen kernel) of each planned conv step."""
    from edgecnn.ir.graph import Node
    from edgecnn.kernels.cpu.conv.residual import conv_part
    from edgecnn.kernels.registry import candidate_kernels
    from edgecnn.kernels.tuning_measure import heuristic_choice

    plan = net.plan_for(x)
    layers = []
    for step in plan.steps:
        node = step.node
        if node.op not in CONV_OPS and node.op != "FusedConvAdd":
            continue
        types = [plan.types.get(i) if i else None for i in node.inputs]
        values = [plan.constants.get(i) if i else None for i in node.inputs]
        chosen = step.kernel.name
        if node.op == "FusedConvAdd":  # a residual block's tail: its convolution is timed alone
            inner, types, values = conv_part(node, types, values)
            node = Node(inner.op, node.name, inner.inputs, inner.outputs, inner.attrs)
            chosen = heuristic_choice(candidate_kernels(node, types, values), node, types, values)
        layers.append((node, types, values, chosen))
    return layers


# ---------------------------------------------------------------------------------------------------
# Timing


def timed_ms(fn: Callable[[], object]) -> float:
    """Wall milliseconds of one call."""
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def drop_from_page_cache(*paths: Path) -> None:
    """Flush ``paths`` and drop their pages from the page cache: the next read comes from the disk,
    as cold as an unprivileged process can make it."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def interleaved(timers: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median ms of each timer, one call of each per round (one warm-up call each first)."""
    for fn in timers.values():
        fn()
    samples: dict[str, list[float]] = defaultdict(list)
    for _ in range(rounds):
        for name, fn in timers.items():
            samples[name].append(timed_ms(fn))
    return {name: float(np.median(values)) for name, values in samples.items()}


def time_steps(net: Any) -> dict[str, list[tuple[float, float]]]:
    """Wraps every step of ``net``'s prepared run (it must have run once) so that each call appends
    its (wall, process CPU) seconds under "layer (kernel)"; returns that dict, filled by later runs.

    It reaches into the prepared actions: the cached plan's ``memory.entries`` (``Model._plans``),
    or, in revisions before the complete Plan, the executor's runner (``Model._fast_runs``).
    """
    samples: dict[str, list[tuple[float, float]]] = {}

    def timed(run: Callable[..., Any], label: str) -> Callable[..., Any]:
        def call(*arguments: Any) -> Any:
            wall, cpu = time.perf_counter(), time.process_time()
            result = run(*arguments)
            samples.setdefault(label, []).append((time.perf_counter() - wall, time.process_time() - cpu))
            return result

        return call

    def wrapped(entries: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(
            (entry[0], timed(entry[1], f"{entry[-1].node.name} ({entry[-1].kernel.name})"), *entry[2:])
            for entry in entries
        )

    plans = getattr(net, "_plans", None)
    runs = getattr(net, "_fast_runs", None)
    if runs:
        runner = next(iter(runs.values()))
        runner._entries = wrapped(runner._entries)
    elif plans and hasattr(next(iter(plans.values())), "memory"):
        memory = next(reversed(plans.values())).memory
        memory.entries = wrapped(memory.entries)
    return samples


# ---------------------------------------------------------------------------------------------------
# Thresholds for an experiment


@contextlib.contextmanager
def tuned(**fields: object) -> Iterator[None]:
    """Plans built inside the block use the CPU tuning record with ``fields`` replaced
    (``dataclasses.replace(DEFAULT_CPU_TUNING, **fields)``); the package's defaults are untouched."""
    try:
        from edgecnn.kernels.cpu.tuning_record import DEFAULT_CPU_TUNING, using_cpu_tuning
    except ImportError as error:  # the record is introduced by issue 30
        raise SystemExit(f"this experiment needs edgecnn.kernels.cpu.tuning_record ({error})") from error
    known = {f.name for f in dataclasses.fields(DEFAULT_CPU_TUNING)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise SystemExit(f"the CPU tuning record has no field {', '.join(unknown)} (it has {sorted(known)})")
    with using_cpu_tuning(dataclasses.replace(DEFAULT_CPU_TUNING, **fields)):
        yield


# ---------------------------------------------------------------------------------------------------
# The machine line and marked sections of a page


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (or what platform knows)."""
    cpuinfo = Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine_line(threads: int | None = None) -> str:
    """CPU, cores, threads and the load average beside the numbers (only comparable on a quiet machine)."""
    import numba

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    used = f", {threads} threads" if threads is not None else ""
    return (
        f"Machine: {cpu_name()}, {os.cpu_count()} cores visible{used}; Python {platform.python_version()}, "
        f"numpy {np.__version__}, numba {numba.__version__}; load average {load}"
    )


def replace_section(text: str, mark: str, body: list[str]) -> str:
    """``text`` with the block between ``<!-- MARK:start -->`` and ``<!-- MARK:end -->`` replaced by
    ``body`` (appended at the end if the markers are absent)."""
    start, end = f"<!-- {mark}:start -->", f"<!-- {mark}:end -->"
    block = "\n".join([start, *body, end])
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text)
    return text.rstrip("\n") + "\n\n" + block + "\n"


def write_section(doc: Path, key: str, body: str, before: str | None = None) -> None:
    """Put ``body`` between ``<!-- key:begin -->`` and ``<!-- key:end -->`` in ``doc``; if the markers
    are absent, insert the block before the heading line ``before`` (or append it)."""
    begin, end = f"<!-- {key}:begin -->", f"<!-- {key}:end -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    text = doc.read_text()
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    elif before is not None and f"\n{before}\n" in text:
        head, tail = text.split(f"\n{before}\n", 1)
        text = f"{head}\n{block}\n\n{before}\n{tail}"
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    doc.write_text(text)


# ---------------------------------------------------------------------------------------------------
# Another revision of the package, in child processes


def package_sources(revision: str, folder: Path) -> dict[str, Path]:
    """{"before": REV's ``src`` unpacked into ``folder``, "after": this tree's ``src``}: what
    PYTHONPATH points child processes at, one version each."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", revision, "src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return {"before": folder / "src", "after": REPO / "src"}


def run_child(source: Path, command: list[str]) -> object:
    """The JSON a child process prints last, run with the package from ``source``."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------------
# How far apart the two cores are (core_round_trip.c)

CORE_ROUND_TRIP = LAB / "core_round_trip.c"
FAR_NS = 250.0
"""Round trips above this count as cores far apart (readings cluster near 100 and near 450 ns)."""


@functools.cache
def _round_trip_program() -> Path:
    """core_round_trip.c compiled once per process (needs a C compiler: cc)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("core_distance needs a C compiler (cc or gcc) on PATH")
    target = Path(tempfile.mkdtemp(prefix="edgecnn-core-distance-")) / "core_round_trip"
    subprocess.run([compiler, "-O2", "-pthread", str(CORE_ROUND_TRIP), "-o", str(target)], check=True)
    return target


def round_trip_ns() -> float:
    """One reading of a cache line's round trip between CPU 0 and CPU 1 (200,000 hand-overs, about
    20-90 ms); needs both CPUs."""
    if len(os.sched_getaffinity(0)) < 2:
        raise RuntimeError("core_distance needs two CPUs")
    out = subprocess.run([str(_round_trip_program())], capture_output=True, text=True, check=True)
    return float(out.stdout)


def far_apart(round_trip: float) -> bool:
    return round_trip > FAR_NS


# ---------------------------------------------------------------------------------------------------
# One-operator device benchmarks (opencl_ops.py, cuda_ops.py): seed 001's sizes and table

M, K, N = 512, 1024, 512
C, H, W = 100, 256, 256


@dataclass
class Row:
    op: str
    where: str
    how: str
    times_ms: list[float]
    work: float  # flops, or bytes for memory-bound ops
    unit: str  # "GFLOP/s" or "GB/s"

    @property
    def median(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def rate(self) -> float:
        return self.work / (self.median * 1e-3) / 1e9


def timed(
    fn: Callable[[], Any], warmup: int, repeat: int, sync: Callable[[], None] = lambda: None
) -> list[float]:
    """Milliseconds of ``repeat`` calls after ``warmup`` (``sync`` waits for the device after each)."""
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def one_node_model(op: str, attrs: Any, x: np.ndarray, constants: dict[str, np.ndarray]) -> Any:
    """A model of one ``op`` node on input ``x`` with ``constants``, planned for the CPU, unoptimised."""
    from edgecnn.ir.graph import Graph, Node, TensorSpec
    from edgecnn.model import Model
    from edgecnn.runtime.options import RuntimeOptions

    names = ["x", *constants]
    graph = Graph(
        [TensorSpec("x", "float32", x.shape)], ["y"], [Node(op, op, names, ["y"], attrs)], constants
    )
    return Model(graph, RuntimeOptions.resolve(device="cpu", optimize=False))


def markdown(rows: list[Row], repeat: int) -> str:
    lines = [
        f"| operator | where | how | median ms | best ms | rate (of {repeat} runs' median) |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r.op} | {r.where} | {r.how} | {r.median:.2f} | {min(r.times_ms):.2f} | {r.rate:.2f} {r.unit} |"
        )
    return "\n".join(lines)
