"""OpenCL kernels (pyopencl), registered for the "opencl" backend: GEMM in seed 001's three forms,
convolution (im2col + GEMM, 1x1, direct), pooling, activations, LRN, softmax, broadcasting
arithmetic, shape views, Concat, Split and Transpose. Importing this package needs no OpenCL: pyopencl is imported when a
plan first asks for a device (a DeviceError says what is missing).

Each factory prepares for the device of :func:`edgecnn.devices.active_device` (``opencl:0`` unless
a plan is built inside ``using_device(...)``). Every step works with host arrays (copying in and
out) and offers ``run_device``, which the executor (edgecnn.runtime.executor) calls so that
activations stay on the device between OpenCL steps.
"""

from edgecnn.kernels.opencl import activation, conv, dense, eltwise, norm, pool, views  # noqa: F401  (registration)
from edgecnn.kernels.opencl.array import DeviceArray
from edgecnn.kernels.opencl.runtime import OpenCLDevice, get_device

__all__ = ["DeviceArray", "OpenCLDevice", "get_device"]
