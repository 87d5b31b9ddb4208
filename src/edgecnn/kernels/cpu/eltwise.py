"""Stand-alone activations (Relu, LeakyRelu, Clip, Sigmoid, HardSwish, HardSigmoid) on the CPU — those the
fusion pass could not fold into a conv or dense layer. One pass over the data in float32, which
beats numpy's temporaries from ``CpuTuning.eltwise_min_size`` elements up; below it numpy's lower
call overhead wins and the reference runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.gemm.epilogue import ActivationKind, activate_in_place, activation_args
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import is_float32, shape_of, single_output
from edgecnn.kernels.cpu.system.threads import call, max_threads
from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning
from edgecnn.ops.fused import FusedActivation
from edgecnn.ops.registry import get_op

CHUNK = 16384


@numba.njit(cache=True)
def _activate_chunk(x: np.ndarray, out: np.ndarray, kind: int, alpha: float, low: float, high: float) -> None:
    """out = act(x). The kinds but ReLU copy ``x`` to ``out`` (unless it is ``x``) and run
    ``activate_in_place`` there: one loop per kind, in vector code. A loop reading ``x`` and
    writing ``out`` would vectorise only behind a run-time overlap check that ``out`` being ``x``
    always fails, and ``activate`` per element branches on the kind and stays scalar."""
    if kind == 1:
        zero = np.float32(0.0)
        for i in range(x.shape[0]):
            v = x[i]
            out[i] = zero if v <= zero else v  # NaN stays NaN
    else:
        if x.ctypes.data != out.ctypes.data:
            out[:] = x  # a chunk: in cache for the pass that follows
        activate_in_place(out, np.uint64(0), np.uint64(out.shape[0]), kind, alpha, low, high)


@numba.njit(parallel=True, nogil=True, cache=True)
def activation(
    x: np.ndarray, kind: int, alpha: float, low: float, high: float, chunk: int, out: np.ndarray
) -> None:
    """out = act(x) for flat float32 arrays, chunk by chunk in parallel."""
    size = x.shape[0]
    for c in numba.prange((size + chunk - 1) // chunk):
        lo = c * chunk
        hi = min(lo + chunk, size)
        _activate_chunk(x[lo:hi], out[lo:hi], kind, alpha, low, high)


def _fused_form(node: Node, values: Sequence[np.ndarray | None]) -> FusedActivation | None:
    """The activation ``node`` applies, as a fused step would apply it (the op's fusable-activation
    trait, its parameters read from the attributes and constant inputs), or None when its
    parameters are not known when the plan is built (Clip with a bound computed at run time)."""
    trait = next(a for a in get_op(node.op).activations if not a.gated)
    constants = {name: value for name, value in zip(node.inputs, values) if name and value is not None}
    params: dict[str, Any] | None = trait.read(node.attrs, node.inputs, constants)
    return None if params is None else FusedActivation(trait.name, **params)


def when_activation(
    node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]
) -> bool:
    if not (single_output(node) and types and is_float32(types[0])):
        return False
    if math.prod(shape_of(types[0])) < active_cpu_tuning().eltwise_min_size:
        return False
    return _fused_form(node, values) is not None


class Activation:
    in_place = True  # run_into accepts out = x

    def __init__(self, node: Node, types: Sequence[TensorType | None], values: Sequence[np.ndarray | None]):
        self.shape = shape_of(types[0])
        self.activation = activation_args(_fused_form(node, values))
        self.kind = self.activation[0]
        size = int(np.prod(self.shape))
        cheap = self.kind in (ActivationKind.RELU, ActivationKind.LEAKY_RELU, ActivationKind.CLIP)
        tuning = active_cpu_tuning()
        self.small = size < (tuning.memory_bound_grain if cheap else tuning.grain)
        self.chunk = max(CHUNK, -(-size // max_threads()))

    def __call__(self, x: np.ndarray, *_: object) -> np.ndarray:
        out = np.empty(self.shape, dtype=np.float32)
        self.run_into(out, x)
        return out

    def run_into(self, out: np.ndarray, x: np.ndarray, *_: object) -> None:
        """Writes into ``out`` (C-contiguous); ``out`` may be ``x`` itself (in place): each element
        is read before it is written, by the same iteration."""
        flat = np.ascontiguousarray(x).reshape(-1)
        call(
            activation,
            self.small,
            flat,
            *self.activation,
            self.chunk,
            out.reshape(-1),
        )


register("activation", Activation, when=when_activation)
