"""LRN (across channels) and Softmax on OpenCL."""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Node
from edgecnn.kernels.gpu.norm import lrn_params, lrn_supported, softmax_lines, softmax_supported
from edgecnn.kernels.gpu.step import Types, Values, shape_of
from edgecnn.kernels.opencl.array import DeviceArray
from edgecnn.kernels.opencl.step import OpenCLStep, device_for_plan, opencl_kernel


@opencl_kernel("LRN", when=lrn_supported, name="opencl_lrn")
def opencl_lrn(node: Node, types: Types, values: Values) -> OpenCLStep:
    device = device_for_plan()
    shape = shape_of(types[0])
    params = lrn_params(node, shape)
    total = int(np.prod(shape))

    def launch(x: DeviceArray) -> DeviceArray:
        y = DeviceArray.empty(device, shape)
        device.launch_1d("lrn", total, x.buffer, y.buffer, *params)
        return y

    return OpenCLStep(device, launch, (0,))


@opencl_kernel("Softmax", when=softmax_supported, name="opencl_softmax")
def opencl_softmax(node: Node, types: Types, values: Values) -> OpenCLStep:
    """Each work item normalises one (outer, inner) line (kernels.gpu.norm.softmax_lines)."""
    device = device_for_plan()
    shape = shape_of(types[0])
    outer, length, inner = softmax_lines(node, types)

    def launch(x: DeviceArray) -> DeviceArray:
        y = DeviceArray.empty(device, shape)
        if length:
            device.launch_1d("softmax", outer * inner, x.buffer, y.buffer, np.int32(length), np.int32(inner))
        return y

    return OpenCLStep(device, launch, (0,))
