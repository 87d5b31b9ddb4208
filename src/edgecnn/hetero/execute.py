"""Partitioned concurrent execution (seed 001, chapter 4): every splittable layer is divided among the
devices of a :class:`Partition`, one worker thread per device runs its slice, results are gathered on the
host and the next layer starts when all slices are in (layer-level synchronisation, as in the seed). A
layer that one device runs whole has nothing to overlap with, so it runs on the calling thread.

Everything is prepared once per input shape: the leading device's plan supplies the step order, slots and
constants; each device gets its own kernels (``select_kernel``) on its own weight slices. Data movement is
explicit and timed (see :class:`DeviceTiming`): a slice's input is copied to its device, the slice runs and
its output comes back into its channels of the layer's output on the host. A layer run whole on a device
leaves its output there, so consecutive whole layers on one device (e.g. pooling on a GPU that leads) copy
nothing in between; a consumer elsewhere copies it.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgecnn.devices import DeviceTensor, to_host
from edgecnn.errors import EdgeCNNError, GraphError, InputError
from edgecnn.hetero.partition import Partition
from edgecnn.hetero.slicing import slice_layer, split_spec, unit_ranges
from edgecnn.ir.graph import TensorType
from edgecnn.kernels.registry import KernelChoice, select_kernel
from edgecnn.model import Model
from edgecnn.runtime.executor import run_steps
from edgecnn.runtime.plan import Plan, Step, plan_program, preparing_cpu_kernels


@dataclass
class DeviceTiming:
    """Seconds one device spent on copies to it, on kernels and on copies back (gather included)."""

    upload_s: float = 0.0
    compute_s: float = 0.0
    download_s: float = 0.0
    pieces: int = 0

    @property
    def busy_s(self) -> float:
        return self.upload_s + self.compute_s + self.download_s

    def to_dict(self) -> dict[str, float]:
        return {
            "upload_s": self.upload_s,
            "compute_s": self.compute_s,
            "download_s": self.download_s,
            "pieces": self.pieces,
        }


@dataclass(frozen=True)
class Piece:
    """One device's work in one step: a prepared kernel, the weights it takes (None: the frame's value)
    and the output/input channel ranges of a slice (None: the whole layer)."""

    device: str
    kernel: KernelChoice
    constants: tuple[np.ndarray | None, ...]
    out_range: tuple[int, int] | None = None
    in_range: tuple[int, int] | None = None


@dataclass(frozen=True)
class PartStep:
    """A plan step and the pieces it is divided into (one piece: the layer runs whole on one device)."""

    step: Step
    pieces: tuple[Piece, ...]
    out_type: TensorType | None


@dataclass
class RunStats:
    """What the partitioned runs so far cost: wall time, and each device's copy and kernel time."""

    runs: int = 0
    wall_s: float = 0.0
    devices: dict[str, DeviceTiming] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "runs": self.runs,
            "wall_s": self.wall_s,
            "devices": {d: t.to_dict() for d, t in self.devices.items()},
        }


def _is_opencl_step(run: Any) -> bool:
    return type(run).__module__.startswith("edgecnn.kernels.opencl") and hasattr(run, "device_inputs")


def _upload(run: Any, args: list[Any]) -> list[Any]:
    """Copy an OpenCL step's variable inputs to its device now, so the copy is timed on its own."""
    if not _is_opencl_step(run):
        return args
    from edgecnn.kernels.opencl.array import to_device

    moved = [
        to_device(run.device, a) if i in run.device_inputs and a is not None else a
        for i, a in enumerate(args)
    ]
    run.device.finish()
    return moved


def run_piece(piece: Piece, args: list[Any], out: np.ndarray | None, timing: DeviceTiming) -> tuple[Any, ...]:
    """Run one piece on the calling (worker) thread. A slice writes its part of ``out`` and returns ();
    a whole layer returns its outputs, left on the device when its kernel produced them there (the next
    layer on the same device reads them in place; any other consumer copies them)."""
    start = time.perf_counter()
    if piece.in_range is not None:
        lo, hi = piece.in_range
        args[0] = np.ascontiguousarray(to_host(args[0])[:, lo:hi])
    run = piece.kernel.run
    run_device = getattr(run, "run_device", None)
    args = _upload(run, args) if run_device is not None else [to_host(a) for a in args]
    uploaded = time.perf_counter()
    try:
        result = run_device(*args) if run_device else run(*args)
        results = result if isinstance(result, tuple) else (result,)
        for value in results:
            if isinstance(value, DeviceTensor):
                value.wait()
    except EdgeCNNError:
        raise
    except Exception as exc:
        raise GraphError(f"{piece.device}: kernel '{piece.kernel.name}' failed: {exc}") from exc
    computed = time.perf_counter()
    if out is not None and piece.out_range is not None:
        lo, hi = piece.out_range
        out[:, lo:hi] = to_host(results[0])
        results = ()
    timing.upload_s += uploaded - start
    timing.compute_s += computed - uploaded
    timing.download_s += time.perf_counter() - computed
    timing.pieces += 1
    return results


def _set_numba_threads(threads: int) -> None:
    """Worker initializer: numba's thread budget is per calling thread."""
    import numba

    from edgecnn.kernels.cpu.system.threads import max_threads

    numba.set_num_threads(min(threads, max_threads()))


class PartitionedModel:
    """A model run with its layers divided among several devices at once; ``run`` equals ``Model.run``.

    ``feeds`` fixes the input shapes the pieces are prepared for (other shapes are refused). Close it (or
    use ``with``) to stop the worker threads.
    """

    def __init__(self, model: Model, partition: Partition, feeds: Any, threads: int | None = None) -> None:
        self.partition = partition
        self.threads = threads or model.options.threads
        if self.threads < 1:
            raise InputError(f"threads must be >= 1, got {self.threads}")
        for device in partition.devices:
            model.options.on_device(device)  # an unknown or absent device fails here
        # The caller's other options (passes, batch handling...) carry over; only device and threads change.
        options = dataclasses.replace(model.options.on_device(partition.lead), threads=self.threads)
        self.lead_model = Model(model.graph, options)
        checked = self.lead_model.check_feeds(feeds)
        self.input_shapes = {name: tuple(a.shape) for name, a in checked.items()}
        self.plan: Plan = self.lead_model.plan_for(checked)
        with preparing_cpu_kernels(options, "cpu" in partition.devices):
            self.steps = tuple(self._prepare(step) for step in self.plan.steps)
        kernels = [KernelChoice(part.step.kernel.name, _PartRun(self, part)) for part in self.steps]
        # the lead plan's program with each step dispatched to its pieces, run by the one executor loop
        self._partitioned = plan_program(
            self.plan.program.with_kernels(kernels), self.plan.wanted, self.threads, in_arena=False
        )
        self.stats = RunStats(devices={d: DeviceTiming() for d in partition.devices})
        self._workers: dict[str, ThreadPoolExecutor] = {}
        for device in partition.devices:
            cpu = device == "cpu"
            self._workers[device] = ThreadPoolExecutor(
                1,
                thread_name_prefix=f"edgecnn-{device}",
                initializer=functools.partial(_set_numba_threads, self.threads) if cpu else None,
            )
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ preparation
    def _prepare(self, step: Step) -> PartStep:
        node, plan = step.node, self.plan
        out_type = plan.types.get(node.outputs[0]) if node.outputs and node.outputs[0] else None
        spec = split_spec(node, plan.types, plan.constants)
        if spec is None:
            return PartStep(step, (self._whole(step, self.partition.whole_device(node.name)),), out_type)
        counts = self.partition.counts(node.name, spec.units)
        used = [(d, r) for d, r in zip(counts, unit_ranges(list(counts.values()))) if r[1] > r[0]]
        if len(used) == 1:
            return PartStep(step, (self._whole(step, used[0][0]),), out_type)
        pieces = []
        for device, units in used:
            part = slice_layer(node, plan.types, plan.constants, spec, units)
            kernel = select_kernel(
                part.node, part.input_types, part.input_values, backend=device, threads=self.threads
            )
            pieces.append(Piece(device, kernel, part.input_values, part.out_range, part.in_range))
        return PartStep(step, tuple(pieces), out_type)

    def _whole(self, step: Step, device: str) -> Piece:
        node = step.node
        values = tuple(self.plan.constants.get(x) if x else None for x in node.inputs)
        if device == self.partition.lead:
            kernel = step.kernel
        else:
            types = [self.plan.types.get(x) if x else None for x in node.inputs]
            kernel = select_kernel(node, types, values, backend=device, threads=self.threads)
        return Piece(device, kernel, tuple(None for _ in values))

    # ------------------------------------------------------------------------ running
    def layers(self) -> list[dict[str, object]]:
        """Each step's placement: node, op and the output-channel range (or "all") per device."""
        rows: list[dict[str, object]] = []
        for part in self.steps:
            placement = {
                p.device: ("all" if p.out_range is None else f"{p.out_range[0]}:{p.out_range[1]}")
                for p in part.pieces
            }
            kernels = {p.device: p.kernel.name for p in part.pieces}
            rows.append(
                {
                    "node": part.step.node.name,
                    "op": part.step.node.op,
                    "devices": placement,
                    "kernels": kernels,
                }
            )
        return rows

    def run(self, feeds: Any) -> dict[str, np.ndarray]:
        """Run once; returns the graph outputs like ``Model.run``."""
        checked = self.lead_model.check_feeds(feeds)
        shapes = {name: tuple(a.shape) for name, a in checked.items()}
        if shapes != self.input_shapes:
            raise InputError(
                f"this partition was prepared for input shapes {self.input_shapes}, got {shapes}"
            )
        with self._lock:
            return self._run(checked)

    def _run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        from edgecnn.kernels.cpu import cpu_threads

        start = time.perf_counter()
        with cpu_threads(self.threads):
            values = run_steps(self._partitioned.memory, tuple(feeds.values()))
        self.stats.runs += 1
        self.stats.wall_s += time.perf_counter() - start
        return dict(zip(self._partitioned.wanted, values))

    def run_part(self, part: PartStep, args_all: list[Any]) -> tuple[Any, ...]:
        """One step: a whole layer on its device, or its slices on their devices at once."""
        if len(part.pieces) == 1:  # nothing runs beside it: no thread hand-off (~0.1 ms a step)
            piece = part.pieces[0]
            try:
                return run_piece(piece, list(args_all), None, self.stats.devices[piece.device])
            except GraphError as exc:
                raise GraphError(f"node {part.step.node}: {exc}") from exc
        assert part.out_type is not None
        out = np.empty(part.out_type.dims, dtype=part.out_type.dtype)
        x = self._to_host(args_all[0])  # once, not once per slice
        futures = []
        for piece in part.pieces:
            args = [x, *piece.constants[1:]]
            futures.append(self._submit(piece, args, out))
        for future in futures:
            self._result(part, future)
        return (out,)

    def _to_host(self, value: Any) -> Any:
        """A device-resident activation copied to the host, timed as its device's copy out."""
        if not isinstance(value, DeviceTensor):
            return value
        start = time.perf_counter()
        host = to_host(value)
        owner = str(getattr(getattr(value, "device", None), "name", ""))
        if owner in self.stats.devices:
            self.stats.devices[owner].download_s += time.perf_counter() - start
        return host

    def _submit(self, piece: Piece, args: list[Any], out: np.ndarray | None) -> Future[tuple[Any, ...]]:
        timing = self.stats.devices[piece.device]
        return self._workers[piece.device].submit(run_piece, piece, args, out, timing)

    @staticmethod
    def _result(part: PartStep, future: Future[tuple[Any, ...]]) -> tuple[Any, ...]:
        try:
            return future.result()
        except GraphError as exc:
            raise GraphError(f"node {part.step.node}: {exc}") from exc

    def reset_stats(self) -> None:
        self.stats = RunStats(devices={d: DeviceTiming() for d in self.partition.devices})

    # ---------------------------------------------------------------------- lifetime
    def close(self) -> None:
        for worker in self._workers.values():
            worker.shutdown(wait=True)

    def __enter__(self) -> PartitionedModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _PartRun:
    """A partitioned step as the executor calls it (``run_device``: its values may stay on a device)."""

    def __init__(self, runner: PartitionedModel, part: PartStep) -> None:
        self.runner = runner
        self.part = part

    def run_device(self, *args: Any) -> tuple[Any, ...]:
        return self.runner.run_part(self.part, list(args))

    __call__ = run_device


def run_partitioned(
    model: Model, partition: Partition, feeds: Any, threads: int | None = None
) -> dict[str, np.ndarray]:
    """One partitioned run (preparation included): for tests and one-off checks."""
    with PartitionedModel(model, partition, feeds, threads) as runner:
        return runner.run(feeds)


__all__ = ["DeviceTiming", "PartitionedModel", "Piece", "RunStats", "run_partitioned"]
