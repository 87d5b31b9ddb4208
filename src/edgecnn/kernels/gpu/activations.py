"""Activations on a GPU: one code per name for the device source's ``activate`` (the fused names of
edgecnn.ops.fused.ACTIVATIONS, then the standalone ones), its formula per name in a C dialect that
OpenCL C and CUDA C++ both compile, and the rules of the standalone activation ops (Relu, Clip...).

Adding a fused activation to ops.fused needs one formula here; a test checks that every name has one."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.gpu.step import is_float32
from edgecnn.ops.fused import ACTIVATIONS, FusedActivation

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
}
"""The body of ``activate``'s case per activation, over ``v`` and the parameters ``slope``, ``low``,
``high``; ``sigmoid_of`` (overflow-free) is each backend's. NaN propagates as in the numpy reference."""

ACTIVATION_CODES: Mapping[str, int] = {
    name: code for code, name in enumerate(dict.fromkeys((*ACTIVATIONS, *FORMULAS)))
}
"""Code of each activation in the device source: ACTIVATIONS' order (0 is "none"), then the rest."""

NO_ACTIVATION: ActivationParams = (np.int32(0), np.float32(0.0), np.float32(-math.inf), np.float32(math.inf))


def activation_params(attrs: FusedActivation) -> ActivationParams:
    """The launch arguments of a fused op's activation."""
    return (
        np.int32(ACTIVATION_CODES[attrs.activation]),
        np.float32(attrs.negative_slope),
        np.float32(attrs.low),
        np.float32(attrs.high),
    )


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
}
"""Standalone activation op -> its name in ACTIVATION_CODES."""

Bounds = Callable[..., tuple[float, float, float]]
"""(slope, low, high) of an activation step, from the run's extra inputs (Clip's bounds)."""


def activation_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0]) and all(t is None or t.dtype == "float32" for t in types[1:])


def _bound(value: object, default: float) -> float:
    return default if value is None else float(np.asarray(value).reshape(-1)[0])


def activation_bounds(node: Node, values: Values) -> Bounds:
    """The step's (slope, low, high): LeakyRelu's slope; Clip's bounds read once when known at plan
    time, else from the host at each run; nothing for the others."""
    if node.op == "Clip":
        fixed = [None if i >= len(values) or values[i] is None else values[i] for i in (1, 2)]

        def bounds(low: object = None, high: object = None) -> tuple[float, float, float]:
            low = fixed[0] if fixed[0] is not None else low
            high = fixed[1] if fixed[1] is not None else high
            return 0.0, _bound(low, -math.inf), _bound(high, math.inf)

        return bounds
    slope = float(node.attrs.alpha) if node.op == "LeakyRelu" else 0.0
    return lambda *rest: (slope, -math.inf, math.inf)
