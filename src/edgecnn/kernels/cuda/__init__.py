"""CUDA kernels through CuPy, registered for the "cuda" backend: convolution (im2col + cuBLAS GEMM,
1x1 as a direct GEMM, a direct kernel for depthwise), Gemm/MatMul, pooling, activations, LRN,
softmax, broadcasting arithmetic, shape views, Concat, Split and Transpose. Importing this package
needs no CuPy: it is imported when a plan first asks for a CUDA device (a DeviceError says what is
missing), and this package only when a device ``cuda[:N]`` is asked for (edgecnn.kernels.registry).

Each factory prepares for the device of :func:`edgecnn.devices.active_device` (``cuda:0`` unless a
plan is built inside ``using_device(...)``). Every step works with host arrays (copying in and out)
and offers ``run_device``, which the executor calls so that activations stay on the GPU between
CUDA steps: host transfers happen only at the edges of a model.
"""

from edgecnn.kernels.cuda import activation, conv, dense, eltwise, norm, pool, views  # noqa: F401  (registration)
from edgecnn.kernels.cuda.array import CudaArray
from edgecnn.kernels.cuda.runtime import CudaDevice, get_device

__all__ = ["CudaArray", "CudaDevice", "get_device"]
