"""The operator registry: each op is defined once with its attributes, type inference, numpy
reference kernel and traits (what other layers need to know of it: whether it treats every image of
a batch alone, its weight input, its multiply-accumulates, whether it only re-reads its input, how
its reference writes into a given buffer, which op it becomes with a fused activation, and whether
it is an activation a fused step can apply).
Fast kernels (edgecnn.kernels) only make ops faster."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from edgecnn.ir.graph import TensorType

InferFn = Callable[[Any, Sequence["TensorType | None"], Sequence["np.ndarray | None"]], list[TensorType]]
"""infer(attrs, input_types, input_values) -> output types.

``input_types[i]`` is None for an omitted optional input; ``input_values[i]`` holds the
value of inputs that are known constants (initializers or folded), else None.
"""

ReferenceFn = Callable[..., Any]
"""reference(attrs, *inputs) -> ndarray or tuple of ndarrays (omitted optional inputs are None)."""


@dataclass(frozen=True)
class StepShapes:
    """What a per-sample trait sees of one step of a prepared plan: the node's attributes, each
    input's concrete shape (None: omitted or unknown), the value of each constant input (None: not
    a constant) and the rank of the first output."""

    attrs: Any
    inputs: tuple[tuple[int, ...] | None, ...]
    constants: tuple[np.ndarray | None, ...]
    output_rank: int


PerSampleFn = Callable[[StepShapes], bool]
"""Whether the step treats every image of a batch (axis 0 of its inputs and outputs) alone."""

WeightFn = Callable[[Any, Sequence["np.ndarray | None"]], "tuple[int, int] | None"]
"""weight(attrs, constant input values) -> (input index of the weights, axis of their output
channels), or None when the node has no constant weights."""

MacsFn = Callable[[Any, Sequence["TensorType | None"], "TensorType | None"], int]
"""macs(attrs, input types, output type) -> multiply-accumulates of one run (0 if shapes are unknown)."""

WorkspaceFn = Callable[[Any, Sequence["TensorType | None"], Sequence["TensorType | None"]], int]
"""workspace(attrs, input types, output types) -> bytes the reference kernel allocates beyond its
operands in one run (0 if shapes are unknown), so that planning can refuse it within the budget."""


@dataclass(frozen=True)
class IntoAdapter:
    """A write-into form of an op's reference kernel: ``run_into(out, *inputs)`` (``out`` a tuple
    for several outputs) writes the reference's result into ``out`` without allocating it, so that
    steps no compiled kernel covers still run in the arena. ``in_place``: the input positions that
    may be given as the output."""

    run_into: Callable[..., None]
    in_place: tuple[int, ...] = ()


ReferenceIntoFn = Callable[[Any, Sequence["TensorType | None"], Sequence[TensorType]], "IntoAdapter | None"]
"""reference_into(attrs, input types, output types) -> the write-into form for these concrete types
(an omitted optional input is None), or None when the reference's meaning needs a fresh result."""

Slabs = Literal["inputs", "outputs"]
"""Which side of a step may be contiguous slabs of the other along ``attrs.axis``: "inputs" of the
output (Concat), "outputs" of the input (Split)."""


@dataclass(frozen=True)
class FusableActivation:
    """How a fused step (FusedConv, FusedGemm, the fused pools) applies an activation op to its output.

    ``name`` is its entry in ``edgecnn.ops.fused.ACTIVATIONS`` and ``code`` its position there, the
    number compiled epilogues branch on. Its parameters are ``FusedActivation`` fields, read from the
    op's attributes (``from_attrs``: (field, attribute) pairs) or from scalar constant inputs
    (``from_inputs``: (field, input index) pairs). ``gated``: applied as x * op(x), the pattern
    Mul(x, op(x)) (SiLU is x * Sigmoid(x)). ``op`` is filled in by ``register_op``."""

    name: str
    code: int
    from_attrs: tuple[tuple[str, str], ...] = ()
    from_inputs: tuple[tuple[str, int], ...] = ()
    gated: bool = False
    op: str = ""

    def read(
        self, attrs: Any, inputs: Sequence[str], constants: dict[str, np.ndarray]
    ) -> dict[str, float] | None:
        """The fused activation's parameters of a node of ``self.op`` with these attributes and
        inputs, or None when a fused step cannot apply it (an input beyond the first that is not
        a constant, or a parameter input that is not a floating-point scalar)."""
        if any(name and name not in constants for name in inputs[1:]):
            return None
        params = {field: float(getattr(attrs, attr)) for field, attr in self.from_attrs}
        for field, index in self.from_inputs:
            name = inputs[index] if len(inputs) > index else ""
            if not name:
                continue  # omitted: the FusedActivation field's default
            value = constants[name]
            if value.size != 1 or value.dtype.kind != "f":
                return None
            params[field] = float(value.reshape(()))
        return params

    def apply(self, params: Any, y: np.ndarray) -> np.ndarray:
        """The op's numpy reference applied to ``y`` with the parameters held by ``params`` (a
        ``FusedActivation``), times ``y`` when gated; in y's dtype."""
        op = get_op(self.op)
        attrs = op.attrs_type(**{attr: getattr(params, field) for field, attr in self.from_attrs})
        extra: list[np.ndarray | None] = [None] * max((index for _, index in self.from_inputs), default=0)
        for field, index in self.from_inputs:
            extra[index - 1] = np.asarray(getattr(params, field))
        out = op.reference(attrs, y, *extra)
        return np.asarray(y * out if self.gated else out, dtype=y.dtype)


@dataclass(frozen=True)
class OpDef:
    """Everything edgecnn knows about the meaning of one operator.

    Traits: ``family`` is the computation the op performs, its own name unless it is a fused form
    of another op (FusedConv's family is "Conv"); ``with_activation`` the op it becomes when an
    activation is fused into its output; ``per_sample`` whether a step treats every image alone
    (None: never); ``weight`` where its constant weights are; ``macs`` its multiply-accumulates
    (None: not compute-bound); ``view`` whether its first output is its first input's data read
    with another shape; ``reference_into`` the write-into form of its reference (None: it allocates
    its result); ``slabs`` which of its tensors may lie as contiguous slabs of the other side, so
    that the buffer planner can elide the step; ``activations`` how fused steps apply it, if it is
    an activation; ``workspace`` what its reference allocates beyond its operands (None: at most
    a few times their size, runtime/memory.py)."""

    name: str
    attrs_type: type
    infer: InferFn
    reference: ReferenceFn
    min_inputs: int
    max_inputs: int | None  # None: variadic
    num_outputs: tuple[int, int]  # (min, max) outputs
    foldable: bool  # may be evaluated at plan time when all inputs are constants
    shape_only: bool = False  # reads only its inputs' shapes: folded once they are concrete
    family: str = ""
    with_activation: str | None = None
    per_sample: PerSampleFn | None = None
    weight: WeightFn | None = None
    macs: MacsFn | None = None
    view: bool = False
    reference_into: ReferenceIntoFn | None = None
    slabs: Slabs | None = None
    activations: tuple[FusableActivation, ...] = ()
    workspace: WorkspaceFn | None = None

    def run_reference(self, attrs: Any, inputs: Sequence[np.ndarray | None]) -> tuple[np.ndarray, ...]:
        result = self.reference(attrs, *inputs)
        return result if isinstance(result, tuple) else (result,)


@dataclass(frozen=True)
class NoAttrs:
    """Attributes of an operator that has none."""


_REGISTRY: dict[str, OpDef] = {}


def register_op(
    name: str,
    *,
    infer: InferFn,
    attrs: type = NoAttrs,
    inputs: int | tuple[int, int | None] = 1,
    outputs: int | tuple[int, int] = 1,
    foldable: bool = True,
    shape_only: bool = False,
    family: str = "",
    with_activation: str | None = None,
    per_sample: PerSampleFn | None = None,
    weight: WeightFn | None = None,
    macs: MacsFn | None = None,
    view: bool = False,
    reference_into: ReferenceIntoFn | None = None,
    slabs: Slabs | None = None,
    activations: Sequence[FusableActivation] = (),
    workspace: WorkspaceFn | None = None,
) -> Callable[[ReferenceFn], ReferenceFn]:
    """Register ``name`` with its traits (see ``OpDef``); the decorated function is its numpy
    reference kernel."""
    min_in, max_in = (inputs, inputs) if isinstance(inputs, int) else inputs
    num_out = (outputs, outputs) if isinstance(outputs, int) else outputs

    def decorate(reference: ReferenceFn) -> ReferenceFn:
        if name in _REGISTRY:
            raise RuntimeError(f"operator {name} registered twice")
        _REGISTRY[name] = OpDef(
            name=name,
            attrs_type=attrs,
            infer=infer,
            reference=reference,
            min_inputs=min_in,
            max_inputs=max_in,
            num_outputs=num_out,
            foldable=foldable,
            shape_only=shape_only,
            family=family or name,
            with_activation=with_activation,
            per_sample=per_sample,
            weight=weight,
            macs=macs,
            view=view,
            reference_into=reference_into,
            slabs=slabs,
            activations=tuple(replace(a, op=name) for a in activations),
            workspace=workspace,
        )
        return reference

    return decorate


def get_op(name: str) -> OpDef:
    _ensure_loaded()
    return _REGISTRY[name]


def find_op(name: str) -> OpDef | None:
    """The definition of ``name``, or None when no op has that name."""
    _ensure_loaded()
    return _REGISTRY.get(name)


def op_family(name: str) -> str:
    """The computation op ``name`` performs: "Conv" for Conv and FusedConv, "Gemm" for Gemm and
    FusedGemm...; an unknown op is its own family."""
    definition = find_op(name)
    return name if definition is None else definition.family


def known_ops() -> frozenset[str]:
    _ensure_loaded()
    return frozenset(_REGISTRY)


def fusable_activations() -> tuple[FusableActivation, ...]:
    """Every activation a fused step can apply, in code order."""
    _ensure_loaded()
    found = [a for op in _REGISTRY.values() for a in op.activations]
    return tuple(sorted(found, key=lambda a: a.code))


def fusable_activation(name: str) -> FusableActivation | None:
    """The fusable activation called ``name`` ("relu", "silu"...), or None."""
    return next((a for a in fusable_activations() if a.name == name), None)


_loaded: list[bool] = []  # [True] once edgecnn.ops is imported completely: planning asks per node


def _ensure_loaded() -> None:
    if _loaded:
        return
    import edgecnn.ops  # (importing the package registers every family)

    if hasattr(edgecnn.ops, "__all__"):  # the package's last statement: its import has finished
        _loaded.append(True)
