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
from edgecnn.limits import using_budget
from edgecnn.ops.registry import known_ops
from edgecnn.passes import optimize
from edgecnn.profiling.layer_timer import LayerTimer, Profile
from edgecnn.runtime.collector import collector_paused
from edgecnn.runtime.executor import run_plan
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.runtime.plan import Plan, build_plan
from edgecnn.runtime.plan_cache import PlanCache
from edgecnn.runtime.shapes import InferenceResult, check_arity, infer_graph


class Model:
    """A loaded model. Safe to call from several threads at once."""

    def __init__(self, graph: Graph, options: RuntimeOptions | None = None) -> None:
        with collector_paused():  # the node copies made here are not garbage
            graph.verify(known_ops())
            for node in graph.nodes:
                check_arity(node)
            self.graph = graph.topologically_sorted()
        self.options = options or RuntimeOptions.resolve()
        self._plans = PlanCache(self.options.memory_limit)
        self._plans_lock = threading.Lock()
        self._inputs = [s for s in self.graph.inputs if s.name not in self.graph.initializers]
        self._input_names = tuple(s.name for s in self._inputs)
        # what the passes fold and what inference finds is checked against the model's memory limit
        with using_budget(self.options.budget), collector_paused():
            if self.options.optimize:
                self.optimized_graph, self.pass_reports = optimize(self._for_device(self.graph))
            else:
                self.optimized_graph, self.pass_reports = self.graph, []
            self._outputs, self._declared = self._infer_output_specs()
        self._optimized_tensors = tensor_names(self.optimized_graph)
        self._graph_tensors = tensor_names(self.graph)

    def _for_device(self, graph: Graph) -> Graph:
        """On OpenCL an int8 (QDQ) model runs as float (passes/qdq_as_clip.py)."""
        if not self.options.device.startswith("opencl"):
            return graph
        from edgecnn.passes.qdq_as_clip import clip_activation_qdq

        return clip_activation_qdq(graph).graph

    # ----------------------------------------------------------------- specs
    @property
    def inputs(self) -> list[TensorSpec]:
        return list(self._inputs)

    @property
    def outputs(self) -> list[TensorSpec]:
        return list(self._outputs)

    def _infer_output_specs(self) -> tuple[list[TensorSpec], DeclaredInference | None]:
        """Output specs from symbolic inference on the optimised graph; fall back to the file's
        declarations. When every input's shape is declared, that inference is also the one a plan
        for exactly those shapes starts from: returned with the declared types, for those plans."""
        declared = {s.name: s.type for s in self._inputs}
        concrete = all(t.is_concrete for t in declared.values())
        try:
            inferred = infer_graph(self.optimized_graph, declared, fold=True)
        except GraphError:
            if concrete:
                raise  # with fully known input shapes, an inference failure is a real model error
            inferred = InferenceResult()
        specs = []
        for name in self.graph.outputs:
            t = inferred.types.get(name) or self.graph.output_types.get(name) or TensorType("float32", None)
            specs.append(TensorSpec(name, t.dtype, t.shape))
        return specs, (declared, inferred) if concrete else None

    # ------------------------------------------------------------------- run
    def run(
        self, feeds: Any, outputs: Sequence[str] | None = None, threads: int | None = None
    ) -> dict[str, np.ndarray]:
        """Run the model. ``feeds``: {input name: array}, or an array for a one-input model.

        ``outputs`` may name graph outputs or any intermediate tensor (for debugging). ``threads``
        caps this run's CPU threads below the model's own (e.g. 1 for each of several inputs run
        side by side from several Python threads); the values do not depend on it.
        """
        plan, inputs = self._prepared(feeds, outputs)
        return dict(zip(plan.wanted, run_plan(plan, inputs, threads=threads)))

    def __call__(self, *arrays: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        """``model(x)`` -> output array (a tuple when the model has several outputs)."""
        if len(arrays) != len(self._inputs):
            raise InputError(
                f"model takes {len(self._inputs)} input(s) "
                f"({', '.join(s.name for s in self._inputs)}), got {len(arrays)}"
            )
        plan, inputs = self._prepared(dict(zip(self._input_names, arrays)), None)
        values = run_plan(plan, inputs)
        return values[0] if len(values) == 1 else tuple(values)

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
        plan, inputs = self._prepared(feeds, None)
        for _ in range(warmup):
            run_plan(plan, inputs)
            if on_iteration is not None:
                on_iteration()
        timer = LayerTimer()
        iteration_ms = []
        for _ in range(iterations):
            start = time.perf_counter()
            run_plan(plan, inputs, (timer,))
            iteration_ms.append((time.perf_counter() - start) * 1e3)
            if on_iteration is not None:
                on_iteration()
        return Profile(layers=timer.layers(), iteration_ms=iteration_ms)

    def save(
        self,
        path: str | os.PathLike[str],
        storage: Mapping[str, str] | None = None,
        *,
        encrypt: Any = None,
        sign: Any = None,
    ) -> None:
        """Write the model as it was imported (before optimisation) to an ``.ecnn`` file, atomically.

        ``storage`` maps tensor names to compressed storages ("float16", "int8", "csr", ...; see
        edgecnn.compress); every other tensor is stored raw (memory-mapped on load). ``encrypt``
        (a model key, its file or a callback) encrypts the file; ``sign`` (an Ed25519 private key
        or its PEM file) signs it (docs/security.md)."""
        from edgecnn.format import save_ecnn

        save_ecnn(self.graph, path, storage, encrypt=encrypt, sign=sign)

    def plan_for(self, feeds: Any, *, optimized: bool = True, outputs: Sequence[str] | None = None) -> Plan:
        """The prepared plan for these inputs' shapes (built on first use, then cached), on the
        optimised graph or the graph as imported, returning the graph outputs or ``outputs``."""
        checked = self.check_feeds(feeds)
        request = self._request(outputs, optimized)
        return self._plan((*request, _shapes_key(tuple(checked.values()))), checked)

    def _request(
        self, outputs: Sequence[str] | None, optimized: bool = True
    ) -> tuple[bool, tuple[str, ...] | None]:
        """(run the optimised graph, the checked requested tensors or None for the graph outputs).
        Tensors removed by fusion or folding are still inspectable: such requests run the graph as
        imported."""
        wanted = None if outputs is None else self._check_wanted(outputs)
        return optimized and (wanted is None or set(wanted) <= self._optimized_tensors), wanted

    def _prepared(self, feeds: Any, outputs: Sequence[str] | None) -> tuple[Plan, tuple[np.ndarray, ...]]:
        """The plan for a run and its inputs in the plan's order. Arrays whose shapes and dtypes
        were checked before skip the checks (their outcome depends on nothing else)."""
        request = self._request(outputs)
        arrays = self._plain_arrays(feeds)
        if arrays is not None:
            with self._plans_lock:
                plan = self._cached((*request, _shapes_key(arrays)))
            if plan is not None:
                return plan, arrays
        checked = self.check_feeds(feeds)
        arrays = tuple(checked.values())
        return self._plan((*request, _shapes_key(arrays)), checked), arrays

    def _plain_arrays(self, feeds: Any) -> tuple[np.ndarray, ...] | None:
        """The feeds in input order when every one is a plain ndarray, else None."""
        if isinstance(feeds, dict):
            if len(feeds) != len(self._input_names):
                return None
            arrays = tuple(feeds.get(name) for name in self._input_names)
        elif len(self._input_names) == 1:
            arrays = (feeds,)
        else:
            return None
        plain = tuple(a for a in arrays if type(a) is np.ndarray)
        return plain if len(plain) == len(arrays) else None

    def _plan(self, key: PlanKey, checked: Mapping[str, np.ndarray]) -> Plan:
        """The cached plan under ``key``, else a new one (runtime/plan_cache.py drops the least
        recently used beyond its count and the memory limit)."""
        with self._plans_lock:
            plan = self._cached(key)
            if plan is not None:
                return plan
            optimized, wanted, _ = key
            types = {n: TensorType(a.dtype.name, tuple(a.shape)) for n, a in checked.items()}
            graph = self.optimized_graph if optimized else self.graph
            declared = self._declared
            inferred = declared[1] if optimized and declared is not None and declared[0] == types else None
            with collector_paused():
                plan = build_plan(graph, types, self.options, wanted, inferred)
            self._plans.put(key, plan)
            return plan

    def _cached(self, key: PlanKey) -> Plan | None:
        """The plan under ``key``, marked most recently used (the caller holds the lock)."""
        return self._plans.get(key)

    def clear_cache(self) -> None:
        """Drop every prepared plan (their prepared weights and arenas); the next run plans again."""
        with self._plans_lock:
            self._plans.clear()

    # ------------------------------------------------------------ validation
    def check_feeds(self, feeds: Any) -> dict[str, np.ndarray]:
        """The feeds as run() would take them: a dict of name -> ndarray, one per model input.

        ``feeds`` is a dict, or a bare array for a one-input model; array-likes are converted to the
        declared dtype, arrays must already have it. Raises InputError naming the input and axis for
        unknown or missing names, a wrong dtype or rank, or a shape that contradicts the declared
        one. Symbolic dimensions constrain nothing here, as in onnxruntime: exporters name unknown
        sizes '?' or reuse one name on unrelated axes, and sizes the graph needs to agree are
        caught by shape inference when the plan is built. Public so that executors outside Model
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
        return {
            spec.name: self._check_one(spec, _plain_native(spec.name, feeds[spec.name]))
            for spec in self._inputs
        }

    @staticmethod
    def _check_one(spec: TensorSpec, value: Any) -> np.ndarray:
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
        return array

    def _check_wanted(self, outputs: Sequence[str]) -> tuple[str, ...]:
        if isinstance(outputs, str):
            outputs = [outputs]
        unknown = [n for n in outputs if n not in self._graph_tensors]
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
        return tuple(outputs)

    def __repr__(self) -> str:
        ins = ", ".join(map(str, self._inputs))
        outs = ", ".join(map(str, self._outputs))
        return f"<edgecnn.Model '{self.graph.name}': {len(self.graph.nodes)} nodes; inputs {ins}; outputs {outs}>"


ShapesKey = tuple[tuple[tuple[int, ...], "np.dtype[Any]"], ...]
PlanKey = tuple[bool, "tuple[str, ...] | None", ShapesKey]
"""(optimised graph, requested tensors or None for the graph outputs, (shape, dtype) per input)."""
DeclaredInference = tuple[dict[str, TensorType], InferenceResult]
"""The inputs' declared types and the optimised graph's inference for them."""


def _plain_native(name: str, value: Any) -> Any:
    """Arrays as the kernels take them: a plain ndarray (subclasses viewed as one; masked arrays
    refused, their mask would be ignored) in the machine's byte order (big-endian data converted)."""
    if not isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.ma.MaskedArray):
        raise InputError(f"input '{name}': masked arrays are not supported; pass .filled(value)")
    array = np.asarray(value)
    if array.dtype.fields is None and not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    return array


def _shapes_key(arrays: Sequence[np.ndarray]) -> ShapesKey:
    return tuple((array.shape, array.dtype) for array in arrays)


def tensor_names(graph: Graph) -> frozenset[str]:
    """Every tensor a graph defines: inputs, initializers and node outputs."""
    names = {spec.name for spec in graph.inputs} | set(graph.initializers)
    names.update(out for node in graph.nodes for out in node.outputs if out)
    return frozenset(names)
