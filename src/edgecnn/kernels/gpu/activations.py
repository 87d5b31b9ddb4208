"""Activations on a GPU: one formula per name in a C dialect that OpenCL C and CUDA C++ both compile,
its code in the device source's ``activate``, and the rules of the standalone activation ops (Relu,
Clip...).

A fused step whose activation has no formula here (one registered in edgecnn.ops since) is declined
by the GPU kernels (:func:`applies_activation`) and runs on the reference kernel; a test checks that
every activation edgecnn.ops defines has a formula."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.gpu.step import is_float32
from edgecnn.ops.fused import FusedActivation
from edgecnn.ops.registry import get_op

Types = Sequence["TensorType | None"]
Values = Sequence["np.ndarray | None"]

ActivationParams = tuple[np.int32, np.float32, np.float32, np.float32]
"""(code, negative slope, low, high): the launch arguments of ``activate``."""

FORMULAS: Mapping[str, str] = {
    "relu": "return v < 0.0f ? 0.0f : v;",
    "leaky_relu": "return v >= 0.0f ? v : v * slope;",
    "clip": "{ const float t = v < low ? low : v; return t > high ? high : t; }",  # max then min, as Clip
    "sigmoid": "return sigmoid_of(v);",
    "hard_swish": "return v * fmin(fmax(v / 6.0f + 0.5f, 0.0f), 1.0f);",
    "silu": "return v * sigmoid_of(v);",
    "tanh": "return tanh(v);",
    # the scale in slope's slot, the offset in low's (SLOTS); NaN stays NaN, as np.clip keeps it
    "hard_sigmoid": "{ const float t = slope * v + low; return t != t ? t : fmin(fmax(t, 0.0f), 1.0f); }",
}
"""The body of ``activate``'s case per activation, over ``v`` and the parameters ``slope``, ``low``,
``high``; ``sigmoid_of`` (overflow-free) is each backend's. NaN propagates as in the numpy reference."""

SLOTS: Mapping[str, tuple[str, str, str]] = {"hard_sigmoid": ("scale", "offset", "high")}
"""The FusedActivation fields an activation's (slope, low, high) launch slots carry, where they are
not (negative_slope, low, high)."""

ACTIVATION_CODES: Mapping[str, int] = {name: code for code, name in enumerate(("none", *FORMULAS))}
"""Code of each activation in the device source: 0 is "none", then FORMULAS' order."""

NO_ACTIVATION: ActivationParams = (np.int32(0), np.float32(0.0), np.float32(-math.inf), np.float32(math.inf))


def activation_params(attrs: FusedActivation) -> ActivationParams:
    """The launch arguments of a fused op's activation."""
    slope, low, high = (getattr(attrs, field) for field in _slots(attrs.activation))
    return np.int32(ACTIVATION_CODES[attrs.activation]), np.float32(slope), np.float32(low), np.float32(high)


def _slots(activation: str) -> tuple[str, str, str]:
    return SLOTS.get(activation, ("negative_slope", "low", "high"))


def node_activation(node: Node) -> ActivationParams:
    """The launch arguments of the activation a node applies to its output: its fused one (FusedConv,
    FusedGemm, the fused pools...), none for an op without."""
    return activation_params(node.attrs) if isinstance(node.attrs, FusedActivation) else NO_ACTIVATION


def applies_activation(node: Node) -> bool:
    """Whether the device source can apply the node's fused activation (always, for an op without
    one): the GPU kernels of fused ops decline the others, which then run on the reference kernel."""
    return not isinstance(node.attrs, FusedActivation) or node.attrs.activation in ACTIVATION_CODES


def activate_source(qualifier: str) -> str:
    """``#define ACT_<NAME> code`` per activation and ``float activate(v, kind, slope, low, high)``,
    declared with ``qualifier`` ("" for OpenCL C, "__device__" for CUDA)."""
    defines = "\n".join(f"#define ACT_{name.upper()} {code}" for name, code in ACTIVATION_CODES.items())
    cases = "\n".join(
        f"    case ACT_{name.upper()}: {FORMULAS[name]}" for name in ACTIVATION_CODES if name != "none"
    )
    head = f"{qualifier} float" if qualifier else "float"
    return (
        f"{defines}\n\n"
        f"{head} activate(const float v, const int kind, const float slope, const float low, const float high) {{\n"
        f"    switch (kind) {{\n{cases}\n    default: return v;\n    }}\n}}\n"
    )


ACTIVATION_OPS: Mapping[str, str] = {
    "Relu": "relu",
    "LeakyRelu": "leaky_relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "HardSwish": "hard_swish",
    "Clip": "clip",
    "HardSigmoid": "hard_sigmoid",
}
"""Standalone activation op -> its name in ACTIVATION_CODES."""

Bounds = Callable[..., tuple[float, float, float]]
"""(slope, low, high) of an activation step, from the run's extra inputs (Clip's bounds)."""


def activation_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0]) and all(t is None or t.dtype == "float32" for t in types[1:])


def activation_bounds(node: Node, values: Values) -> Bounds:
    """The step's (slope, low, high) where the op's fusable-activation trait keeps them: in its
    attributes (LeakyRelu's slope) or its scalar inputs (Clip's bounds; read once when known at plan
    time, else from the host at each run); FusedActivation's defaults otherwise (Tanh has no trait)."""
    trait = next((a for a in get_op(node.op).activations if not a.gated), None)
    fixed = {field: float(getattr(node.attrs, attr)) for field, attr in trait.from_attrs} if trait else {}
    per_run: list[tuple[str, int]] = []
    for field, index in trait.from_inputs if trait else ():
        value = values[index] if index < len(values) else None
        if value is not None:
            fixed[field] = _scalar(value)
        else:
            per_run.append((field, index))

    slots = _slots(ACTIVATION_OPS[node.op])
    if not per_run:
        constant = _launch_bounds(slots, fixed)
        return lambda *rest: constant

    def bounds(*rest: object) -> tuple[float, float, float]:
        params = dict(fixed)
        for field, index in per_run:
            value = rest[index - 1] if index <= len(rest) else None
            if value is not None:
                params[field] = _scalar(value)
        return _launch_bounds(slots, params)

    return bounds


def _launch_bounds(slots: tuple[str, str, str], params: Mapping[str, float]) -> tuple[float, float, float]:
    """(slope, low, high): the FusedActivation fields in ``slots``, given in ``params`` or its defaults."""
    default = FusedActivation()
    slope, low, high = (params.get(field, getattr(default, field)) for field in slots)
    return slope, low, high


def _scalar(value: object) -> float:
    return float(np.asarray(value).reshape(-1)[0])
