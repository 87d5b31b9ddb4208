"""What the device-independent backend tests share: a `Backend` ("opencl" or "cuda", device index 0)
that plans one node or a whole graph there, runs it next to the numpy reference and compares them
(edgecnn.testing.assert_matches). Written once so that the OpenCL and CUDA kernels answer the same tests."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

import edgecnn.kernels.cuda as cuda_kernels
import edgecnn.kernels.opencl as opencl_kernels
from edgecnn.devices import cuda_device_infos, opencl_devices
from edgecnn.ir.dtypes import dtype_name
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.model import Model
from edgecnn.runtime.options import RuntimeOptions
from edgecnn.testing import assert_matches, reference_run

KINDS = ("opencl", "cuda")


@functools.cache
def opencl_unusable() -> str | None:
    """Why opencl:0 cannot run kernels here, or None when it builds one: no device at all, or a
    device whose compiler rejects this machine (pocl's LLVM on a CPU newer than itself fails every
    build with "unknown target CPU"; the engine then raises DeviceError, tested in tests/kernels/gpu/opencl)."""
    devices = opencl_devices()
    if not devices:
        return "no pyopencl or no OpenCL platform/device on this machine"
    import pyopencl as cl

    try:
        context = cl.Context([devices[0]])
        cl.Program(context, "__kernel void probe(__global float *x) { x[0] = 1.0f; }").build()
    except cl.Error as exc:
        lines = str(exc).splitlines()
        return f"opencl:0 builds no kernel on this machine: {next((x for x in lines if 'error:' in x), lines[0])}"
    return None


def unavailable(kind: str) -> str | None:
    """Why ``kind`` cannot run here, or None when device 0 of that kind can run kernels."""
    if kind == "opencl":
        return opencl_unusable()
    return None if cuda_device_infos() else "no CuPy or CuPy finds no CUDA GPU on this machine"


@dataclass(frozen=True)
class Backend:
    """One GPU-ish backend under test: the "opencl" or "cuda" kernels on device 0."""

    kind: str

    def __str__(self) -> str:
        return self.kind

    @property
    def name(self) -> str:
        """The device name users pass to edgecnn.load: "opencl:0" or "cuda:0"."""
        return f"{self.kind}:0"

    @property
    def kernels(self) -> ModuleType:
        """The kernel package (edgecnn.kernels.opencl or .cuda)."""
        return opencl_kernels if self.kind == "opencl" else cuda_kernels

    @property
    def array_type(self) -> type:
        """The device-resident tensor class (DeviceArray or CudaArray)."""
        return opencl_kernels.DeviceArray if self.kind == "opencl" else cuda_kernels.CudaArray

    def device(self) -> Any:
        """The backend's device object for index 0 (opened once)."""
        return self.kernels.get_device(0)

    def kernel(self, suffix: str) -> str:
        """The full kernel name, e.g. kernel("max_pool") -> "opencl_max_pool"."""
        return f"{self.kind}_{suffix}"

    def pick(self, **per_kind: Any) -> Any:
        """The value given for this backend, e.g. pick(opencl=30, cuda=40)."""
        return per_kind[self.kind]

    def model(self, graph: Graph, optimize: bool = True) -> Model:
        """A model planned for this backend (its kernels on device 0), one CPU thread."""
        return Model(graph, RuntimeOptions.resolve(threads=1, device=self.kind, optimize=optimize))

    def run(
        self, op: str, attrs: Any, inputs: Sequence[np.ndarray | None], constant_inputs: Sequence[int] = ()
    ) -> tuple[np.ndarray, str]:
        """The node's output here (no graph passes) and the name of the kernel that ran."""
        graph, feeds = one_node_graph(op, attrs, inputs, constant_inputs)
        model = self.model(graph, optimize=False)
        (step,) = model.plan_for(feeds).steps
        return model.run(feeds)["out0"], step.kernel.name

    def check_node(
        self,
        op: str,
        attrs: Any,
        inputs: Sequence[np.ndarray | None],
        constant_inputs: Sequence[int] = (),
        kernel: str | None = None,
        magnitude: float = 1.0,
    ) -> str:
        """This backend equals the reference on the node and the kernel ``<kind>_<kernel>`` ran (any of
        this backend's kernels when ``kernel`` is None); returns the kernel name."""
        actual, name = self.run(op, attrs, inputs, constant_inputs)
        if kernel is not None:
            assert name == self.kernel(kernel), f"{op} ran {name}, expected {self.kernel(kernel)}"
        assert name.startswith(f"{self.kind}_"), f"{op} fell back to {name}"
        assert_matches(actual, reference_run(op, attrs, inputs, constant_inputs), magnitude)
        return name

    def kernel_forms(self) -> Sequence[Callable[[], contextlib.AbstractContextManager[None]]]:
        """The kernel forms a geometry test must cover. OpenCL has two: the CPU-device forms of im2col
        and pooling (one work item per row) and the GPU forms (one per element), whatever opencl:0 is;
        CUDA has one."""
        if self.kind == "opencl":
            return (lambda: opencl_forms(cpu=True), lambda: opencl_forms(cpu=False))
        return (contextlib.nullcontext,)


@contextlib.contextmanager
def opencl_forms(cpu: bool) -> Iterator[None]:
    """Plans built inside use opencl:0's CPU-device (``cpu``) or GPU kernel forms."""
    device = opencl_kernels.get_device(0)
    saved = device.is_cpu
    device.is_cpu = cpu
    try:
        yield
    finally:
        device.is_cpu = saved


def one_node_graph(
    op: str, attrs: Any, inputs: Sequence[np.ndarray | None], constant_inputs: Sequence[int], outputs: int = 1
) -> tuple[Graph, dict[str, np.ndarray]]:
    """A graph of one node: inputs in ``constant_inputs`` become initializers, None inputs are omitted."""
    names = ["" if x is None else f"in{i}" for i, x in enumerate(inputs)]
    runtime = [i for i, x in enumerate(inputs) if x is not None and i not in constant_inputs]
    graph = Graph(
        [TensorSpec(names[i], dtype_name(inputs[i].dtype), tuple(inputs[i].shape)) for i in runtime],  # type: ignore[union-attr]
        [f"out{i}" for i in range(outputs)],
        [Node(op, "node", names, [f"out{i}" for i in range(outputs)], attrs)],
        {names[i]: np.asarray(inputs[i]) for i in constant_inputs if inputs[i] is not None},
        name=op,
    )
    return graph, {names[i]: inputs[i] for i in runtime}  # type: ignore[misc]


def assert_close_to(actual: np.ndarray, expected: np.ndarray) -> None:
    """Whole-model bar: 1e-4 relative to the output's scale."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * float(np.abs(expected).max()))


def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)
