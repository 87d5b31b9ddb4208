"""Adapters that run an ONNX file on edgecnn and on each peer engine, behind one small interface.

Peers are optional: each adapter imports its package only inside ``available``/``prepare``, and an
engine whose package is missing is skipped with the reason. Every adapter is set up for float32
(no fp16/bf16 storage or arithmetic) and the requested number of threads, so the comparison is fair.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

QUIET_POOLS = {"OMP_WAIT_POLICY": "PASSIVE"}
"""Environment for one process that hosts several engines: OpenMP workers sleep instead of spinning
when idle. With spinning workers (libgomp's default), an idle engine's threads steal the cores of
the one being timed and slow it by an order of magnitude on a machine with few cores."""


def quiet_thread_pools() -> dict[str, str]:
    """Apply QUIET_POOLS where the user has not chosen otherwise; call before any engine loads.

    Returns the values in effect (for the report)."""
    for key, value in QUIET_POOLS.items():
        os.environ.setdefault(key, value)
    return {key: os.environ[key] for key in QUIET_POOLS}


Runner = Callable[[np.ndarray], np.ndarray]
"""A prepared model: input batch -> its first output."""


class Engine:
    """One inference engine. Subclasses set ``name``/``package`` and implement ``prepare``."""

    name = ""
    package = ""  # the import name whose presence makes the engine available
    distribution = ""  # the pip distribution, for the version (defaults to ``package``)

    def available(self) -> str | None:
        """None when usable, else why not (shown in the report)."""
        if importlib.util.find_spec(self.package) is None:
            return f"Python package '{self.distribution or self.package}' is not installed"
        return None

    def version(self) -> str:
        try:
            return importlib.metadata.version(self.distribution or self.package)
        except importlib.metadata.PackageNotFoundError:
            return "?"

    def prepare(self, model: Path, threads: int, input_shape: tuple[int, ...], work_dir: Path) -> Runner:
        """Load ``model`` for inputs of ``input_shape`` on ``threads`` threads; ``work_dir`` caches conversions."""
        raise NotImplementedError


class EdgeCNNEngine(Engine):
    name = "edgecnn"
    package = "edgecnn"

    def version(self) -> str:
        import edgecnn

        return edgecnn.__version__

    def prepare(self, model: Path, threads: int, input_shape: tuple[int, ...], work_dir: Path) -> Runner:
        import edgecnn

        net = edgecnn.load(model, threads=threads)

        def run(x: np.ndarray) -> np.ndarray:
            out = net(x)
            return out[0] if isinstance(out, tuple) else out

        return run


class OnnxRuntimeEngine(Engine):
    name = "onnxruntime"
    package = "onnxruntime"

    def prepare(self, model: Path, threads: int, input_shape: tuple[int, ...], work_dir: Path) -> Runner:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Its pool spins while a run is under way (its default), but stops when the run returns: left
        # spinning after each run, like OpenMP's (QUIET_POOLS), its workers take the cores the next
        # engine is timed on; with spinning off, every operator wakes sleeping workers, which is not
        # how onnxruntime runs for its users. The three settings: lab/notes/2026-11-interleaved.md.
        options.add_session_config_entry("session.intra_op.allow_spinning", "1")
        options.add_session_config_entry("session.force_spinning_stop", "1")
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        input_name = session.get_inputs()[0].name
        output_name = session.get_outputs()[0].name
        return lambda x: session.run([output_name], {input_name: x})[0]


class OpenVINOEngine(Engine):
    name = "openvino"
    package = "openvino"

    def prepare(self, model: Path, threads: int, input_shape: tuple[int, ...], work_dir: Path) -> Runner:
        import openvino as ov

        core = ov.Core()
        network = core.read_model(str(model))
        network.reshape({network.inputs[0].get_any_name(): list(input_shape)})  # static shapes: its fast path
        compiled = core.compile_model(
            network,
            "CPU",
            {
                "INFERENCE_NUM_THREADS": threads,
                "INFERENCE_PRECISION_HINT": "f32",
                "PERFORMANCE_HINT": "LATENCY",
            },
        )
        request = compiled.create_infer_request()

        def run(x: np.ndarray) -> np.ndarray:
            request.infer({0: x})
            return request.get_output_tensor(0).data.copy()

        return run


class TorchEngine(Engine):
    """PyTorch eager, the ONNX file turned into an nn.Module by onnx2torch."""

    name = "torch"
    package = "torch"

    def available(self) -> str | None:
        for package in ("torch", "onnx2torch"):
            if importlib.util.find_spec(package) is None:
                return f"Python package '{package}' is not installed"
        return None

    def prepare(self, model: Path, threads: int, input_shape: tuple[int, ...], work_dir: Path) -> Runner:
        import onnx
        import onnx2torch
        import torch

        torch.set_num_threads(threads)
        module = onnx2torch.convert(onnx.load(str(model))).eval()

        def run(x: np.ndarray) -> np.ndarray:
            with torch.inference_mode():
                out = module(torch.from_numpy(x))
            return (out[0] if isinstance(out, (tuple, list)) else out).numpy()

        return run


class MNNEngine(Engine):
    """MNN's Module API on a file converted by MNN's own converter (cached in ``work_dir``)."""

    name = "mnn"
    package = "MNN"
    distribution = "MNN"

    def prepare(self, model: Path, threads: int, input_shape: tuple[int, ...], work_dir: Path) -> Runner:
        import MNN.expr as expr
        import MNN.nn as nn

        converted = _converted_path(model, work_dir, ".mnn")
        if not converted.exists():
            command = [sys.executable, "-c", "from MNN.tools.mnnconvert import main; main()"]
            args = [
                "-f",
                "ONNX",
                "--modelFile",
                str(model),
                "--MNNModel",
                str(converted),
                "--bizCode",
                "edgecnn",
            ]
            _convert(command + args, converted, "MNN converter")
        config = {"backend": "CPU", "numThread": threads, "precision": "high"}  # high = float32
        runtime = nn.create_runtime_manager((config,))
        names = _io_names(model)
        module = nn.load_module_from_file(str(converted), [names[0]], [names[1]], runtime_manager=runtime)

        def run(x: np.ndarray) -> np.ndarray:
            out = module.forward(expr.const(x, list(x.shape), expr.NCHW))
            return np.array(out.read())

        return run


class NcnnEngine(Engine):
    """ncnn on param/bin files written by pnnx (float32 weights); one sample at a time, as ncnn runs."""

    name = "ncnn"
    package = "ncnn"

    def available(self) -> str | None:
        if importlib.util.find_spec("ncnn") is None:
            return "Python package 'ncnn' is not installed"
        if _pnnx_executable() is None:
            return "ncnn needs the pnnx converter (pip package 'pnnx') to read ONNX"
        return None

    def prepare(self, model: Path, threads: int, input_shape: tuple[int, ...], work_dir: Path) -> Runner:
        import ncnn

        sample_shape = [1, *input_shape[1:]]
        stem = _converted_path(model, work_dir, f"-{'x'.join(map(str, sample_shape))}")
        # not with_suffix: zoo names hold dots ("squeezenet1.1", "w0.5") that it would cut at
        param, weights = (stem.parent / f"{stem.name}.ncnn.{ext}" for ext in ("param", "bin"))
        if not weights.exists():
            _convert_pnnx(model, sample_shape, param, weights)
        net = ncnn.Net()
        net.opt.num_threads = threads
        for flag in ("use_fp16_packed", "use_fp16_storage", "use_fp16_arithmetic", "use_bf16_storage"):
            setattr(net.opt, flag, False)
        if net.load_param(str(param)) != 0 or net.load_model(str(weights)) != 0:
            raise RuntimeError(f"ncnn could not load {param}")

        def run(x: np.ndarray) -> np.ndarray:
            outputs = []
            for sample in x:
                with net.create_extractor() as extractor:
                    extractor.input("in0", ncnn.Mat(np.ascontiguousarray(sample)))
                    _, out = extractor.extract("out0")
                    outputs.append(np.array(out))
            return np.stack(outputs)

        return run


ENGINES: dict[str, type[Engine]] = {
    e.name: e for e in (EdgeCNNEngine, OnnxRuntimeEngine, OpenVINOEngine, NcnnEngine, MNNEngine, TorchEngine)
}


def select_engines(names: list[str] | None) -> tuple[list[Engine], dict[str, str]]:
    """The usable engines among ``names`` (default: all known), and {name: reason} for the skipped ones."""
    from edgecnn.errors import InputError

    wanted = names or list(ENGINES)
    unknown = [n for n in wanted if n not in ENGINES]
    if unknown:
        raise InputError(f"unknown engine(s) {', '.join(unknown)}; known: {', '.join(ENGINES)}")
    usable, skipped = [], {}
    for name in dict.fromkeys(wanted):
        engine = ENGINES[name]()
        reason = engine.available()
        if reason is None:
            usable.append(engine)
        else:
            skipped[name] = reason
    return usable, skipped


# ------------------------------------------------------------------ conversions
def _converted_path(model: Path, work_dir: Path, suffix: str) -> Path:
    """A cache path unique to the model file's content (bundled files share no name with zoo files)."""
    digest = hashlib.sha256()
    with open(model, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    work_dir.mkdir(parents=True, exist_ok=True)
    return work_dir / f"{model.stem}-{digest.hexdigest()[:12]}{suffix}"


def _io_names(model: Path) -> tuple[str, str]:
    import onnx

    graph = onnx.load(str(model), load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}
    inputs = [i.name for i in graph.input if i.name not in initializers]
    return inputs[0], graph.output[0].name


def _convert(command: list[str], expected: Path, tool: str, cwd: Path | None = None) -> None:
    result = subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=1800)
    if result.returncode != 0 or not expected.exists():
        tail = (result.stdout + result.stderr).strip().splitlines()[-3:]
        raise RuntimeError(f"{tool} failed (exit {result.returncode}): {' | '.join(tail)}")


def _pnnx_executable() -> str | None:
    spec = importlib.util.find_spec("pnnx")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            candidate = Path(folder) / "pnnx"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return shutil.which("pnnx")


def _convert_pnnx(model: Path, sample_shape: list[int], param: Path, weights: Path) -> None:
    """pnnx writes several side files next to its input: run it in a scratch directory."""
    executable = _pnnx_executable()
    assert executable is not None
    with tempfile.TemporaryDirectory(prefix="edgecnn-pnnx-") as scratch:
        source = Path(scratch) / "model.onnx"
        os.symlink(model.resolve(), source)
        shape = "[" + ",".join(map(str, sample_shape)) + "]"
        args = [executable, source.name, f"inputshape={shape}", "fp16=0", "optlevel=2"]
        args += [f"ncnnparam={param.resolve()}", f"ncnnbin={weights.resolve()}"]
        _convert(args, weights, "pnnx", cwd=Path(scratch))
