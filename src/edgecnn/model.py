"""Model: a graph plus the plans prepared for each input shape it has been run with."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from edgecnn.errors import GraphError, InputError
from edgecnn.ir.graph import Graph, TensorSpec, TensorType, format_shape
from edgecnn.ops.registry import known_ops
from edgecnn.passes import optimize
from edgecnn.profiling.layer_timer import LayerTimer, Profile
from edgecnn.runtime.batch import batch_separable, run_split, split_pays, threading_layer_is_safe
from edgecnn.runtime.executor import ArenaRunner, StepHook, execute
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.runtime.plan import Plan, build_plan
from edgecnn.runtime.serial import run_threads
from edgecnn.runtime.shapes import infer_graph


class Model:
    """A loaded model. Safe to call from several threads at once."""

    def __init__(self, graph: Graph, options: RuntimeOptions | None = None) -> None:
        graph.verify(known_ops())
        self.graph = graph.topologically_sorted()
        self.options = options or RuntimeOptions.resolve()
        if self.options.optimize:
            self.optimized_graph, self.pass_reports = optimize(self.graph)
        else:
            self.optimized_graph, self.pass_reports = self.graph, []
        self._optimized_tensors = tensor_names(self.optimized_graph)
        self._plans: dict[tuple[object, ...], Plan] = {}
        self._plans_lock = threading.Lock()
        self._split_rule: dict[int, tuple[bool, bool]] = {}  # id(plan) -> runtime.batch rule
        self._run_threads: dict[int, int] = {}  # id(plan) -> threads of its runs (runtime.serial)
        # (shape, dtype) of every input, in order -> the prepared run of the graph outputs (_fast_runner)
        self._fast_runs: dict[tuple[tuple[tuple[int, ...], np.dtype[Any]], ...], ArenaRunner] = {}
        self._inputs = [s for s in self.graph.inputs if s.name not in self.graph.initializers]
        self._outputs = self._infer_output_specs()

    # ----------------------------------------------------------------- specs
    @property
    def inputs(self) -> list[TensorSpec]:
        return list(self._inputs)

    @property
    def outputs(self) -> list[TensorSpec]:
        return list(self._outputs)

    def _infer_output_specs(self) -> list[TensorSpec]:
        """Output specs from symbolic inference; fall back to the file's declarations."""
        declared = {s.name: s.type for s in self._inputs}
        try:
            types = infer_graph(self.graph, declared, fold=True).types
        except GraphError:
            if all(s.type.is_concrete for s in self._inputs):
                raise  # with fully known input shapes, an inference failure is a real model error
            types = {}
        specs = []
        for name in self.graph.outputs:
            t = types.get(name) or self.graph.output_types.get(name) or TensorType("float32", None)
            specs.append(TensorSpec(name, t.dtype, t.shape))
        return specs

    # ------------------------------------------------------------------- run
    def run(self, feeds: Any, outputs: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """Run the model. ``feeds``: {input name: array}, or an array for a one-input model.

        ``outputs`` may name graph outputs or any intermediate tensor (for debugging).
        """
        if outputs is None and self._fast_runs:  # one-input models only (see _fast_runner)
            x = feeds
            if isinstance(feeds, dict):
                x = feeds.get(self._inputs[0].name) if len(feeds) == 1 else None
            runner = self._fast_runs.get(_shapes_key((x,)))  # type: ignore[arg-type]
            if runner is not None:
                return dict(zip(runner.wanted, runner.run_one(x)))
        return self._run(feeds, outputs, ())

    def __call__(self, *arrays: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        """``model(x)`` -> output array (a tuple when the model has several outputs)."""
        if len(arrays) != len(self._inputs):
            raise InputError(
                f"model takes {len(self._inputs)} input(s) "
                f"({', '.join(s.name for s in self._inputs)}), got {len(arrays)}"
            )
        runner = self._fast_runs.get(_shapes_key(arrays)) if self._fast_runs else None  # type: ignore[arg-type]
        if runner is not None:
            values = runner.run_one(arrays[0])
            return values[0] if len(values) == 1 else tuple(values)
        result = self._run(dict(zip((s.name for s in self._inputs), arrays)), None, ())
        values = tuple(result[name] for name in self.graph.outputs)
        return values[0] if len(values) == 1 else values

    def profile(
        self,
        feeds: Any,
        iterations: int = 50,
        warmup: int = 5,
        on_iteration: Callable[[], None] | None = None,
    ) -> Profile:
        """Per-layer and per-iteration timings of ``iterations`` runs after ``warmup`` runs.

        ``on_iteration`` is called after every run, warm-up included (e.g. to advance a progress bar).
        """
        if iterations < 1 or warmup < 0:
            raise InputError(f"iterations must be >= 1 and warmup >= 0, got {iterations}, {warmup}")
        for _ in range(warmup):
            self._run(feeds, None, ())
            if on_iteration is not None:
                on_iteration()
        timer = LayerTimer()
        iteration_ms = []
        for _ in range(iterations):
            start = time.perf_counter()
            self._run(feeds, None, (timer,))
            iteration_ms.append((time.perf_counter() - start) * 1e3)
            if on_iteration is not None:
                on_iteration()
        return Profile(layers=timer.layers(), iteration_ms=iteration_ms)

    def save(self, path: str | os.PathLike[str], storage: Mapping[str, str] | None = None) -> None:
        """Write the model as it was imported (before optimisation) to an ``.ecnn`` file.

        ``storage`` maps tensor names to compressed storages ("float16", "int8", "csr", ...; see
        edgecnn.compress); every other tensor is stored raw (memory-mapped on load)."""
        from edgecnn.format import save_ecnn

        save_ecnn(self.graph, path, storage)

    def plan_for(self, feeds: Any, *, optimized: bool = True) -> Plan:
        """The prepared plan for these inputs' shapes (built on first use, then cached)."""
        return self._plan(self.check_feeds(feeds), optimized)

    def _run(
        self, feeds: Any, outputs: Sequence[str] | None, hooks: Sequence[StepHook]
    ) -> dict[str, np.ndarray]:
        checked = self.check_feeds(feeds)
        # Tensors removed by fusion or folding are still inspectable: such requests run the graph as imported.
        optimized = (
            outputs is None
            or set([outputs] if isinstance(outputs, str) else outputs) <= self._optimized_tensors
        )
        plan = self._plan(checked, optimized)
        wanted = list(self.graph.outputs) if outputs is None else self._check_wanted(outputs, plan)
        if self.options.device != "cpu":
            return execute(plan, checked, wanted, hooks)
        from edgecnn.kernels.cpu import cpu_threads  # lazily: the reference device never loads numba

        if not hooks and outputs is None and len(checked) == 1:
            runner = self._fast_runner(plan, checked, wanted)
            if runner is not None:
                return dict(zip(runner.wanted, runner.run_one(next(iter(checked.values())))))
        with cpu_threads(self._threads_for(plan)):
            parts = 1 if hooks else self._batch_parts(plan, checked, wanted)
            if parts > 1:
                return self._run_split(plan, checked, wanted, optimized, parts)
            return execute(plan, checked, wanted, hooks)

    def _fast_runner(
        self, plan: Plan, checked: Mapping[str, np.ndarray], wanted: Sequence[str]
    ) -> ArenaRunner | None:
        """The prepared whole-batch run of the graph outputs for these input shapes, cached so that
        later calls with arrays of the same shapes and dtypes skip the feed checks (their outcome
        depends on nothing else), the plan lookup and the per-run set-up (runtime.executor).
        None where the batch is split over threads instead."""
        if self._batch_parts(plan, checked, wanted) > 1:
            return None
        key = _shapes_key(tuple(checked.values()))
        if key is None:
            return None
        runner = self._fast_runs.get(key)
        if runner is None:
            runner = self._fast_runs[key] = ArenaRunner(plan, wanted, self._threads_for(plan))
        return runner

    def _threads_for(self, plan: Plan) -> int:
        """Threads for runs of ``plan``: the options' count, or 1 for a small model (runtime/serial.py)."""
        threads = self._run_threads.get(id(plan))
        if threads is None:
            threads = self._run_threads[id(plan)] = run_threads(plan, self.options.threads)
        return threads

    def _batch_parts(self, plan: Plan, feeds: Mapping[str, np.ndarray], wanted: Sequence[str]) -> int:
        """Slices to cut the batch into (1: run whole, with intra-op threads); runtime/batch.py."""
        policy = self.options.batch_parallel
        threads = self.options.threads if policy == "always" else self._threads_for(plan)
        if policy == "never" or threads < 2 or not feeds:
            return 1
        sizes = {value.shape[0] if value.ndim else 0 for value in feeds.values()}
        batch = sizes.pop() if len(sizes) == 1 else 0
        if batch < 2 or any(name in plan.constants for name in wanted) or not threading_layer_is_safe():
            return 1
        rule = self._split_rule.get(id(plan))  # (separable, pays): computed once per plan
        if rule is None:
            separable = batch_separable(plan, batch)
            rule = self._split_rule[id(plan)] = (separable, separable and split_pays(plan, batch, threads))
        if not rule[0] or (policy == "auto" and not rule[1]):
            return 1
        return min(threads, batch)

    def _run_split(
        self, plan: Plan, feeds: Mapping[str, np.ndarray], wanted: Sequence[str], optimized: bool, parts: int
    ) -> dict[str, np.ndarray]:
        """The batch in ``parts`` slices run side by side, each writing its rows of the outputs."""
        shapes = {name: (tuple(plan.types[name].shape), plan.types[name].dtype) for name in wanted}

        def run_slice(slice_feeds: dict[str, np.ndarray], into: dict[str, np.ndarray]) -> None:
            execute(self._plan(slice_feeds, optimized), slice_feeds, wanted, (), into)

        return run_split(feeds, parts, shapes, run_slice)  # type: ignore[arg-type]

    def _plan(self, feeds: Mapping[str, np.ndarray], optimized: bool) -> Plan:
        key = (optimized, *((name, array.dtype.name, array.shape) for name, array in feeds.items()))
        plan = self._plans.get(key)  # type: ignore[arg-type]
        if plan is None:
            with self._plans_lock:
                plan = self._plans.get(key)  # type: ignore[arg-type]
                if plan is None:
                    types = {n: TensorType(a.dtype.name, tuple(a.shape)) for n, a in feeds.items()}
                    graph = self.optimized_graph if optimized else self.graph
                    plan = build_plan(graph, types, self.options)
                    self._plans[key] = plan  # type: ignore[index]
        return plan

    # ------------------------------------------------------------ validation
    def check_feeds(self, feeds: Any) -> dict[str, np.ndarray]:
        """The feeds as run() would take them: a dict of name -> ndarray, one per model input.

        ``feeds`` is a dict, or a bare array for a one-input model; array-likes are converted to the
        declared dtype, arrays must already have it. Raises InputError naming the input and axis for
        unknown or missing names, a wrong dtype or rank, or a shape that contradicts the declared
        one (symbolic dimensions must agree across inputs). Public so that executors outside Model
        (testing.run_node, hetero.execute) validate inputs exactly as run() does."""
        names = [s.name for s in self._inputs]
        if not isinstance(feeds, Mapping):
            if len(names) != 1:
                raise InputError(
                    f"model has {len(names)} inputs ({', '.join(names)}); pass a dict of name -> array"
                )
            feeds = {names[0]: feeds}
        unknown = [k for k in feeds if k not in names]
        if unknown:
            raise InputError(
                f"unknown input name(s) {', '.join(map(repr, unknown))}; the model's inputs are: {', '.join(names)}"
            )
        missing = [n for n in names if n not in feeds]
        if missing:
            raise InputError(f"missing input(s): {', '.join(missing)}")
        checked: dict[str, np.ndarray] = {}
        bindings: dict[str, tuple[int, str]] = {}
        for spec in self._inputs:
            checked[spec.name] = self._check_one(spec, feeds[spec.name], bindings)
        return checked

    @staticmethod
    def _check_one(spec: TensorSpec, value: Any, bindings: dict[str, tuple[int, str]]) -> np.ndarray:
        if isinstance(value, np.ndarray):
            array = value
            if array.dtype.name != spec.dtype:
                raise InputError(
                    f"input '{spec.name}': expected dtype {spec.dtype}, got {array.dtype.name}"
                    f" (convert with .astype(np.{spec.dtype}))"
                )
        else:
            try:
                array = np.asarray(value, dtype=spec.dtype)
            except (TypeError, ValueError) as exc:
                raise InputError(
                    f"input '{spec.name}': cannot convert {type(value).__name__} to {spec.dtype}: {exc}"
                ) from None
        if spec.shape is None:
            return array
        expected = format_shape(spec.shape)
        if array.ndim != len(spec.shape):
            raise InputError(
                f"input '{spec.name}': expected shape {expected} (rank {len(spec.shape)}), got {list(array.shape)}"
            )
        for axis, (want, got) in enumerate(zip(spec.shape, array.shape)):
            if isinstance(want, int) and want != got:
                raise InputError(
                    f"input '{spec.name}': expected shape {expected}, got {list(array.shape)} (axis {axis})"
                )
            if isinstance(want, str):
                bound = bindings.setdefault(want, (got, spec.name))
                if bound[0] != got:
                    raise InputError(
                        f"input '{spec.name}': dimension '{want}' is {got} on axis {axis}, "
                        f"but {bound[0]} in input '{bound[1]}'"
                    )
        return array

    def _check_wanted(self, outputs: Sequence[str], plan: Plan) -> list[str]:
        if isinstance(outputs, str):
            outputs = [outputs]
        unknown = [n for n in outputs if n not in plan.slots and n not in plan.constants]
        if unknown:
            node_outputs = {node.name: node.outputs for node in self.graph.nodes}
            hints = [
                f"'{n}' is a node; its output tensor(s): {', '.join(node_outputs[n])}"
                for n in unknown
                if n in node_outputs
            ]
            raise InputError(
                f"unknown output name(s) {', '.join(map(repr, unknown))}; graph outputs are: "
                f"{', '.join(self.graph.outputs)} (intermediate tensor names are accepted too)"
                + "".join(f"; {h}" for h in hints)
            )
        return list(outputs)

    def __repr__(self) -> str:
        ins = ", ".join(map(str, self._inputs))
        outs = ", ".join(map(str, self._outputs))
        return f"<edgecnn.Model '{self.graph.name}': {len(self.graph.nodes)} nodes; inputs {ins}; outputs {outs}>"


def _shapes_key(arrays: Sequence[Any]) -> tuple[tuple[tuple[int, ...], np.dtype[Any]], ...] | None:
    """(shape, dtype) of each array, or None unless every one is a plain ndarray (the fast path's key)."""
    key = []
    for array in arrays:
        if type(array) is not np.ndarray:
            return None
        key.append((array.shape, array.dtype))
    return tuple(key)


def tensor_names(graph: Graph) -> frozenset[str]:
    """Every tensor a graph defines: inputs, initializers and node outputs."""
    names = {spec.name for spec in graph.inputs} | set(graph.initializers)
    names.update(out for node in graph.nodes for out in node.outputs if out)
    return frozenset(names)
