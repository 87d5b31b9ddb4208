"""FusedConvAdd on the CPU: y = act(conv(x, w, b) + z), a residual block's tail.

The convolution is whatever kernel the registry picks for the same layer as a FusedConv without
activation (Winograd, 1x1 GEMM, im2col, sparse...), written straight into ``out``; then one compiled
pass adds the residual and applies the activation in place. That replaces the unfused Add and
activation steps (two more passes over the tensor, one of them through numpy) by one.

Where the convolution kernel adds the residual itself (``run_into_residual``: the 1x1 and
pixel-row kernels read each value of z where they write that value of y), the step declares
``in_place = (3,)``: the arena may then give y the buffer of z when z dies here, as in every
bottleneck block of ResNet, and the kernel adds onto z where it lies instead of copying it first,
unless the kernel declines (``overwrites_residual = False``: z's lines sit in another core's cache
too). Otherwise ``out`` never aliases an input (the convolution would overwrite z
before the sum reads it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.cpu.conv.setup import conv_setup
from edgecnn.kernels.cpu.gemm.epilogue import (
    activation_args,
    residual_activation_,
    residual_activation_serial_,
)
from edgecnn.kernels.cpu.selection import register
from edgecnn.kernels.cpu.system.common import is_float32, shape_of, single_output
from edgecnn.kernels.cpu.system.threads import max_threads
from edgecnn.kernels.cpu.tuning_record import active_cpu_tuning
from edgecnn.kernels.registry import candidate_kernels, select_kernel
from edgecnn.ops.fused import FusedConvAttrs, residual_conv_node

CHUNK = 16384

Types = Sequence["TensorType | None"]
Values = Sequence["np.ndarray | None"]


def conv_part(
    node: Node, types: Types, values: Values
) -> tuple[Node, list[TensorType | None], list[np.ndarray | None]]:
    """The convolution alone, as a FusedConv without activation, with its inputs' types and values."""
    inner = residual_conv_node(node)
    count = len(inner.inputs)
    return inner, list(types[:count]), list(values[:count])


def when_residual(node: Node, types: Types, values: Values) -> bool:
    """float32, the residual exactly the convolution's output shape, and a compiled conv kernel for it."""
    if not (isinstance(node.attrs, FusedConvAttrs) and single_output(node) and len(types) == 4):
        return False
    inner, inner_types, inner_values = conv_part(node, types, values)
    setup = conv_setup(inner, inner_types)
    if setup is None or not is_float32(types[3]):
        return False
    if shape_of(types[3]) != (setup.batch, setup.out_channels, *setup.out):
        return False
    return bool(candidate_kernels(inner, inner_types, inner_values, "cpu"))


class ConvResidual:
    """The chosen convolution kernel, then the residual + activation epilogue."""

    def __init__(self, node: Node, types: Types, values: Values) -> None:
        inner, inner_types, inner_values = conv_part(node, types, values)
        self.conv = select_kernel(inner, inner_types, inner_values, backend="cpu")
        self.conv_into = getattr(self.conv.run, "run_into", None)
        self.conv_residual_into = getattr(self.conv.run, "run_into_residual", None)
        self.conv_inputs = len(inner.inputs)
        # a kernel may decline the offer where z's lines sit in the other core's cache too
        overwrites = getattr(self.conv.run, "overwrites_residual", True)
        self.in_place = (3,) if overwrites and self.conv_residual_into is not None else ()
        self.out_shape = shape_of(types[3])
        self.activation = activation_args(node.attrs)  # (kind, negative slope, low, high)
        size = int(np.prod(self.out_shape))
        self.small = size < active_cpu_tuning().residual_grain
        self.chunk = max(CHUNK, -(-size // max_threads()))

    @property
    def conv_kernel(self) -> str:
        """The name of the convolution kernel inside (for profiles and tests)."""
        return self.conv.name

    def __call__(self, *inputs: np.ndarray | None) -> np.ndarray:
        out = np.empty(self.out_shape, dtype=np.float32)
        self.run_into(out, *inputs)
        return out

    def run_into(self, out: np.ndarray, *inputs: np.ndarray | None) -> None:
        """Writes into ``out`` (C-contiguous, the output's shape; it may be the residual itself
        where ``in_place`` says so, else it overlaps no input)."""
        conv_inputs = inputs[: self.conv_inputs]
        residual = inputs[3]
        assert residual is not None
        if self.conv_residual_into is not None:  # the sum fused into the kernel's own epilogue
            self.conv_residual_into(out, conv_inputs[0], residual, self.activation)
            return
        if self.conv_into is not None:
            self.conv_into(out, *conv_inputs)
        else:  # the reference convolution: no write-into form
            out[...] = self.conv.run(*conv_inputs)
        # small tensors: the serial twin, which starts no parallel region
        kernel = residual_activation_serial_ if self.small else residual_activation_
        kernel(out.reshape(-1), np.ascontiguousarray(residual).reshape(-1), *self.activation, self.chunk)


register("conv_residual", ConvResidual, when=when_residual)
