"""LRN (across channels) and Softmax on OpenCL."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ir.graph import Node, TensorType
from edgecnn.kernels.opencl.array import DeviceArray
from edgecnn.kernels.opencl.step import OpenCLStep, device_for_plan, is_float32, opencl_kernel, shape_of
from edgecnn.ops.activation import softmax_axes

Types = Sequence["TensorType | None"]
Values = Sequence["np.ndarray | None"]


def lrn_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0]) and (types[0].rank or 0) >= 2 and node.attrs.size >= 1  # type: ignore[union-attr]


@opencl_kernel("LRN", when=lrn_supported, name="opencl_lrn")
def opencl_lrn(node: Node, types: Types, values: Values) -> OpenCLStep:
    device = device_for_plan()
    shape = shape_of(types[0])
    channels, spatial = shape[1], int(np.prod(shape[2:]))
    a = node.attrs
    params = (np.int32(channels), np.int32(spatial), np.int32(a.size), np.float32(a.alpha), np.float32(a.beta),
              np.float32(a.bias))  # fmt: skip
    total = int(np.prod(shape))

    def launch(x: DeviceArray) -> DeviceArray:
        y = DeviceArray.empty(device, shape)
        device.launch_1d("lrn", total, x.buffer, y.buffer, *params)
        return y

    return OpenCLStep(device, launch, (0,))


def softmax_supported(node: Node, types: Types, values: Values) -> bool:
    return is_float32(types[0]) and (types[0].rank or 0) >= 1  # type: ignore[union-attr]


@opencl_kernel("Softmax", when=softmax_supported, name="opencl_softmax")
def opencl_softmax(node: Node, types: Types, values: Values) -> OpenCLStep:
    """The normalised axes are contiguous (one axis, or all from ``axis`` on), so the tensor is
    (outer, L, inner) and each work item normalises one (outer, inner) line."""
    device = device_for_plan()
    shape = shape_of(types[0])
    axes = softmax_axes(node.attrs, len(shape))
    outer = int(np.prod(shape[: axes[0]]))
    length = int(np.prod([shape[a] for a in axes]))
    inner = int(np.prod(shape[axes[-1] + 1 :]))

    def launch(x: DeviceArray) -> DeviceArray:
        y = DeviceArray.empty(device, shape)
        if length:
            device.launch_1d("softmax", outer * inner, x.buffer, y.buffer, np.int32(length), np.int32(inner))
        return y

    return OpenCLStep(device, launch, (0,))
