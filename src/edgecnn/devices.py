"""Devices a model can run on: ``cpu``, every OpenCL device (``opencl:N``) and CUDA GPUs
(``cuda:N``, through CuPy). Names are parsed and checked here once, at the API boundary.

``opencl:N`` counts devices over all OpenCL platforms in the order the ICD loader reports them
(platforms in order, then each platform's devices in order), so the numbering is stable on a machine.

The CPU's description (model, vector extensions, usable cores, BLAS) lives here too: it names the
CPU in `edgecnn devices` and `edgecnn bench` reports, and its hash keys the kernel tuning cache.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import platform
import re
import sys
from contextvars import ContextVar, Token
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgecnn.errors import DeviceError

KINDS = ("cpu", "reference", "opencl", "cuda")
"""Device kinds: the compiled CPU kernels, the numpy reference kernels, OpenCL, CUDA."""

_INDEXED = ("opencl", "cuda")
CPUINFO = Path("/proc/cpuinfo")
_PATTERN = re.compile(r"^(?P<kind>[a-z]+)(?::(?P<index>.*))?$")


@dataclass(frozen=True)
class DeviceSpec:
    """A parsed device name: its kind (the kernel backend) and, for OpenCL/CUDA, its index."""

    kind: str
    index: int | None = None

    @property
    def name(self) -> str:
        """Canonical name: ``cpu``, ``opencl:0``..."""
        return self.kind if self.index is None else f"{self.kind}:{self.index}"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class DeviceInfo:
    """One device this machine offers, as `edgecnn devices` lists it."""

    name: str  # canonical name to pass as device=...
    kind: str
    index: int | None
    label: str  # the hardware's own name
    vendor: str
    compute_units: int
    memory_bytes: int
    platform: str = ""  # OpenCL platform / CUDA runtime; empty for the CPU
    device_type: str = ""  # "CPU", "GPU", "ACCELERATOR"...
    version: str = ""


def parse_device(text: str) -> DeviceSpec:
    """Parse ``cpu``, ``reference``, ``opencl``, ``opencl:N``, ``cuda``, ``cuda:N`` (``opencl`` means
    ``opencl:0``). Checks the syntax only; :func:`find_device` checks the device exists."""
    if not isinstance(text, str):
        raise DeviceError(f"a device name must be a string, got {type(text).__name__}")
    return _parse_name(text)


@functools.lru_cache(maxsize=64)
def _parse_name(text: str) -> DeviceSpec:
    """parse_device's work, remembered: a plan parses its device name once per node."""
    match = _PATTERN.match(text.strip().lower())
    kind = match.group("kind") if match else ""
    if kind not in KINDS:
        raise DeviceError(
            f"unknown device {text!r}: expected cpu, reference, opencl[:N] or cuda[:N] "
            "(`edgecnn devices` lists this machine's)"
        )
    raw_index = match.group("index") if match else None
    if kind not in _INDEXED:
        if raw_index is not None:
            raise DeviceError(f"device {text!r}: '{kind}' takes no index")
        return DeviceSpec(kind)
    if raw_index is None:
        return DeviceSpec(kind, 0)
    if not raw_index.isdigit():
        raise DeviceError(f"device {text!r}: the index after '{kind}:' must be a number >= 0")
    return DeviceSpec(kind, int(raw_index))


# ------------------------------------------------------------------ the device kernels run on
CPU = DeviceSpec("cpu")
_active: ContextVar[DeviceSpec] = ContextVar("edgecnn_active_device", default=CPU)


def active_device() -> DeviceSpec:
    """The device that kernel factories prepare for (set by :func:`using_device` while a plan is built)."""
    return _active.get()


class using_device:  # named as a function: ``with using_device("cpu"):``
    """Within the block, kernel factories prepare their steps for ``device``. A class rather than
    a generator: kernel selection enters one per node."""

    __slots__ = ("spec", "token")
    spec: DeviceSpec
    token: Token[DeviceSpec]

    def __init__(self, device: DeviceSpec | str) -> None:
        self.spec = parse_device(device) if isinstance(device, str) else device

    def __enter__(self) -> DeviceSpec:
        self.token = _active.set(self.spec)
        return self.spec

    def __exit__(self, *exc: object) -> None:
        _active.reset(self.token)


# ------------------------------------------------------------------- tensors on a device
class DeviceTensor:
    """Base of tensors that live in a device's memory (e.g. the OpenCL DeviceArray). An executor keeps
    them between steps whose kernels accept them (``run_device``) and hands :func:`to_host` copies to
    the others; ``np.asarray`` copies one to the host."""

    __slots__ = ()

    def get(self) -> Any:
        """A host numpy copy (waits for the device work that writes the tensor)."""
        raise NotImplementedError

    def wait(self) -> None:
        """Block until the device work that writes this tensor is done (for per-step timing)."""
        raise NotImplementedError


def is_cupy_array(value: Any) -> bool:
    """Whether ``value`` is a CuPy array (without importing CuPy: only if something else already did)."""
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(value, cupy.ndarray)


def to_host(value: Any) -> Any:
    """A DeviceTensor or CuPy array copied to the host; anything else unchanged."""
    if isinstance(value, DeviceTensor) or is_cupy_array(value):
        return value.get()
    return value


# ------------------------------------------------------------------------------ discovery
def list_devices() -> list[DeviceInfo]:
    """Every device this machine offers: the CPU first, then OpenCL devices, then CUDA GPUs."""
    return [cpu_device(), *opencl_device_infos(), *cuda_device_infos()]


def find_device(text: str) -> DeviceInfo:
    """The named device if this machine has it; a DeviceError naming the ones it has otherwise."""
    spec = parse_device(text)
    if spec.kind in ("cpu", "reference"):
        return cpu_device()
    found = opencl_device_infos() if spec.kind == "opencl" else cuda_device_infos()
    for info in found:
        if info.index == spec.index:
            return info
    have = ", ".join(f"{d.name} ({d.label})" for d in found) or "none"
    raise DeviceError(f"no device {spec.name} on this machine; {spec.kind} devices here: {have}")


def cpu_device() -> DeviceInfo:
    """The CPU as `edgecnn devices` lists it."""
    return DeviceInfo(
        name="cpu",
        kind="cpu",
        index=None,
        label=cpu_model(),
        vendor=cpu_vendor(),
        compute_units=available_cores(),
        memory_bytes=_physical_memory(),
        device_type="CPU",
        version=platform.machine(),
    )


def available_cores() -> int:
    """Cores this process may run on (respects affinity masks / cgroups where the OS tells)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _cpuinfo_fields(cpuinfo: Path) -> dict[str, str]:
    """The first value of each key of /proc/cpuinfo (the first processor's); empty off Linux."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError), open(cpuinfo, encoding="utf-8", errors="replace") as f:
        for line in f:
            key, sep, value = line.partition(":")
            if sep:
                fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's marketing name ("model name" on x86, "Model"/"Hardware" on ARM), else platform's answer."""
    fields = _cpuinfo_fields(cpuinfo)
    for key in ("model name", "Model", "Hardware"):
        if fields.get(key):
            return fields[key]
    return platform.processor() or platform.machine() or "unknown"


def cpu_vendor(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's vendor id (x86) or implementer code (ARM); empty where unknown."""
    fields = _cpuinfo_fields(cpuinfo)
    return fields.get("vendor_id") or fields.get("CPU implementer") or ""


def simd_flags(cpuinfo: Path = CPUINFO) -> list[str]:
    """The vector extensions that matter to float32 kernels (AVX2, FMA, AVX-512 ...)."""
    flags = set(_cpuinfo_fields(cpuinfo).get("flags", "").split())
    wanted = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
    return [f for f in wanted if f in flags]


def blas_library() -> str:
    """numpy's BLAS (name, version, threading layer and, where it says, the CPU its kernels were
    chosen for: OpenBLAS runs older kernels where OPENBLAS_CORETYPE names an older CPU), as
    threadpoolctl sees it."""
    import numpy  # noqa: F401  (loads the BLAS so threadpoolctl can see it)
    from threadpoolctl import threadpool_info

    for info in threadpool_info():
        if info.get("user_api") == "blas":
            kernels = f", {info['architecture']} kernels" if info.get("architecture") else ""
            return (
                f"{info.get('internal_api')} {info.get('version')} "
                f"({info.get('threading_layer', '?')} threads{kernels})"
            )
    return "unknown"


@functools.lru_cache(maxsize=1)
def machine_description() -> str:
    """What decides which kernel is fastest here: CPU model and vector extensions, usable cores,
    architecture, the BLAS library (the kernel tuning cache keeps one section per description)."""
    return (
        f"{cpu_model()}; {platform.machine()}; simd {','.join(simd_flags()) or 'none'}; "
        f"{available_cores()} cores; {blas_library()}"
    )


def machine_fingerprint() -> str:
    """A short stable hash of :func:`machine_description`."""
    return hashlib.sha256(machine_description().encode()).hexdigest()[:16]


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def opencl_devices() -> list[Any]:
    """pyopencl Device objects in ``opencl:N`` order; empty without pyopencl or an OpenCL platform."""
    try:
        import pyopencl as cl
    except ImportError:
        return []
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # no ICD installed: CL_PLATFORM_NOT_FOUND_KHR
        return []
    devices: list[Any] = []
    for plat in platforms:
        try:
            devices.extend(plat.get_devices())
        except cl.Error:  # a platform with no usable device
            continue
    return devices


def opencl_device_infos() -> list[DeviceInfo]:
    devices = opencl_devices()
    if not devices:
        return []
    import pyopencl as cl

    infos = []
    for index, dev in enumerate(devices):
        infos.append(
            DeviceInfo(
                name=f"opencl:{index}",
                kind="opencl",
                index=index,
                label=dev.name.strip(),
                vendor=dev.vendor.strip(),
                compute_units=int(dev.max_compute_units),
                memory_bytes=int(dev.global_mem_size),
                platform=dev.platform.name.strip(),
                # pyopencl's stub assigns to_string inside the IntEnum body, so mypy takes it for a member
                device_type=cl.device_type.to_string(dev.type).replace("ALL | ", ""),  # type: ignore[operator]
                version=dev.version.strip(),
            )
        )
    return infos


def cuda_device_infos() -> list[DeviceInfo]:
    """CUDA GPUs through CuPy; empty when CuPy is absent or finds no GPU."""
    try:
        import cupy
    except ImportError:
        return []
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
        runtime = cupy.cuda.runtime.runtimeGetVersion()
    except Exception:  # CuPy without a driver or GPU raises its own CUDARuntimeError
        return []
    infos = []
    for index in range(count):
        props = cupy.cuda.runtime.getDeviceProperties(index)
        name = props.get("name", b"")
        infos.append(
            DeviceInfo(
                name=f"cuda:{index}",
                kind="cuda",
                index=index,
                label=name.decode(errors="replace") if isinstance(name, bytes) else str(name),
                vendor="NVIDIA",
                compute_units=int(props.get("multiProcessorCount", 0)),
                memory_bytes=int(props.get("totalGlobalMem", 0)),
                platform=f"CUDA runtime {runtime // 1000}.{runtime % 1000 // 10}",
                device_type="GPU",
                version=f"compute {props.get('major', '?')}.{props.get('minor', '?')}",
            )
        )
    return infos
