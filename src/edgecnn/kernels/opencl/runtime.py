"""One OpenCL device as the kernels see it: context, in-order queue, memory pool and the program,
built once per device and process (PoCL compiles each kernel again on first use, so caching matters)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from importlib import resources
from typing import Any

from edgecnn.devices import active_device, opencl_devices
from edgecnn.errors import DeviceError
from edgecnn.kernels.gpu.activations import ACTIVATION_CODES, activate_source
from edgecnn.kernels.gpu.step import MAX_ELEMENTS

SOURCES = ("gemm.cl", "conv.cl", "pool.cl", "norm.cl", "eltwise.cl")
"""Kernel sources after the activations (see :func:`program_source`); they use ``activate``."""

ACTIVATION_KERNELS = {code: f"act_{name}" for name, code in ACTIVATION_CODES.items() if code}
"""The elementwise kernel of each activation code (0, none, launches nothing)."""

LOCAL_SIZE = 64
"""Work-group size of the 1-D kernels. A launch covers the largest multiple of it, then the remainder
with work-groups of one (a second launch at a global offset), so the kernels need no bounds check
(with one, PoCL stops vectorising across work items) and each kernel is compiled for two
work-group sizes whatever the tensor shapes."""


def program_source() -> str:
    """The one program of every OpenCL kernel: common.cl, the activations, then SOURCES."""
    package = resources.files("edgecnn.kernels.opencl") / "cl"
    kernels = "\n".join(f"ACTIVATION_KERNEL({kernel}, {code})" for code, kernel in ACTIVATION_KERNELS.items())
    return "\n".join(
        [
            (package / "common.cl").read_text(encoding="utf-8"),
            activate_source(""),
            kernels,
            *((package / name).read_text(encoding="utf-8") for name in SOURCES),
        ]
    )


class OpenCLDevice:
    """Context, queue, memory pool and compiled program of ``opencl:index``."""

    def __init__(self, index: int, device: Any) -> None:
        import pyopencl as cl
        import pyopencl.tools

        self.index = index
        self.device = device
        self.context = cl.Context(devices=[device])
        self.queue = cl.CommandQueue(self.context)
        self.pool = pyopencl.tools.MemoryPool(pyopencl.tools.ImmediateAllocator(self.queue))
        self.local_size = min(LOCAL_SIZE, int(device.max_work_group_size))
        # CPU devices get the row-per-work-item forms of im2col and pooling (see conv.cl).
        self.is_cpu = bool(device.type & cl.device_type.CPU)
        self.tile, self.tile_work = gemm_tile(int(device.max_work_group_size), int(device.local_mem_size))
        self._program: Any = None
        self._kernels: dict[str, Any] = {}
        self._lock = threading.RLock()

    @property
    def name(self) -> str:
        return f"opencl:{self.index}"

    # ----------------------------------------------------------------------- program
    def kernel(self, name: str) -> Any:
        """The named kernel (program built on first use)."""
        found = self._kernels.get(name)
        if found is None:
            with self._lock:
                if self._program is None:
                    self._program = self._build()
                import pyopencl as cl

                found = self._kernels.setdefault(name, cl.Kernel(self._program, name))
        return found

    def _build(self) -> Any:
        import pyopencl as cl

        source = program_source()
        options = [f"-DTS={self.tile}", f"-DWPT={self.tile_work}"]
        try:
            return cl.Program(self.context, source).build(options=options)
        except cl.Error as exc:
            raise DeviceError(
                f"{self.name} ({self.device.name.strip()}): OpenCL build failed: {exc}"
            ) from exc

    # ----------------------------------------------------------------------- launches
    def launch(self, name: str, global_size: Sequence[int], local_size: Sequence[int], *args: Any) -> None:
        """Enqueue kernel ``name``; arguments are set and the kernel enqueued under one lock, since
        a cl.Kernel's arguments are shared by every thread running the model."""
        import pyopencl as cl

        kernel = self.kernel(name)
        with self._lock:
            kernel.set_args(*args)
            cl.enqueue_nd_range_kernel(self.queue, kernel, tuple(global_size), tuple(local_size))

    def launch_1d(self, name: str, total: int, *args: Any) -> None:
        """A 1-D kernel over ``total`` work items (see LOCAL_SIZE)."""
        if total > MAX_ELEMENTS:
            raise DeviceError(f"{self.name}: {name} over {total} work items exceeds 32-bit indexing")
        import pyopencl as cl

        kernel = self.kernel(name)
        step = self.local_size
        body = total // step * step
        with self._lock:
            kernel.set_args(*args)
            if body:
                cl.enqueue_nd_range_kernel(self.queue, kernel, (body,), (step,))
            if total > body:
                cl.enqueue_nd_range_kernel(self.queue, kernel, (total - body,), (1,), (body,))

    # ----------------------------------------------------------------------- memory
    def allocate(self, nbytes: int) -> Any:
        """A buffer from the device's pool (returned to the pool when garbage collected)."""
        return self.pool.allocate(max(int(nbytes), 4))

    def finish(self) -> None:
        self.queue.finish()


def gemm_tile(max_group: int, local_bytes: int) -> tuple[int, int]:
    """(TS, WPT) for gemm_tiled: 16 x 16 tiles, each work item computing 4 outputs of a row, where the
    device allows a 4 x 16 work-group and two 16 x 17 float tiles; smaller otherwise."""
    for tile, work in ((16, 4), (8, 2), (4, 1)):
        if (tile // work) * tile <= max_group and 2 * tile * (tile + 1) * 4 <= local_bytes:
            return tile, work
    return 1, 1


_DEVICES: dict[int, OpenCLDevice] = {}
_DEVICES_LOCK = threading.Lock()


def get_device(index: int | None = None) -> OpenCLDevice:
    """``opencl:index`` (by default the device of :func:`edgecnn.devices.active_device`, else 0), opened once."""
    if index is None:
        spec = active_device()
        index = spec.index if spec.kind == "opencl" and spec.index is not None else 0
    found = _DEVICES.get(index)
    if found is not None:
        return found
    with _DEVICES_LOCK:
        found = _DEVICES.get(index)
        if found is None:
            try:
                import pyopencl  # noqa: F401
            except ImportError:
                raise DeviceError(
                    "the OpenCL backend needs pyopencl: pip install 'edgecnn[opencl]' "
                    "(and an OpenCL driver, e.g. pocl-binary-distribution for the CPU)"
                ) from None
            devices = opencl_devices()
            if not 0 <= index < len(devices):
                have = ", ".join(f"opencl:{i} ({d.name.strip()})" for i, d in enumerate(devices))
                raise DeviceError(f"no device opencl:{index}; OpenCL devices here: {have or 'none'}")
            found = _DEVICES[index] = OpenCLDevice(index, devices[index])
    return found
