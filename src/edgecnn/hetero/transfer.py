"""Host <-> device data-transfer cost: measured latency and bandwidth of each device's copies.

The partitioned executor gathers every split layer's output on the host, so a device whose memory is not
the host's pays a copy in and a copy out per layer. Seed 001's model (speeds add) ignores that; the
fine-grained planner (finegrained.py) charges ``latency + bytes / bandwidth`` per copy.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgecnn.devices import parse_device
from edgecnn.errors import DeviceError

HOST_KINDS = ("cpu", "reference")
"""Devices that compute on host memory: no copies."""

PROBE_BYTES = (4 << 10, 256 << 10, 4 << 20)
"""Copy sizes timed to fit latency and bandwidth (small: latency dominates; large: bandwidth)."""


@dataclass(frozen=True)
class LinkCost:
    """One copy between host and ``device`` costs ``latency_s + nbytes / bytes_per_s`` (0 for host devices)."""

    device: str
    latency_s: float = 0.0
    bytes_per_s: float = math.inf
    measured: bool = False

    def seconds(self, nbytes: float) -> float:
        if nbytes <= 0 or (self.latency_s == 0.0 and math.isinf(self.bytes_per_s)):
            return 0.0
        return self.latency_s + nbytes / self.bytes_per_s

    def to_json(self) -> dict[str, object]:
        return {
            "device": self.device,
            "latency_s": self.latency_s,
            "bytes_per_s": None if math.isinf(self.bytes_per_s) else self.bytes_per_s,
            "measured": self.measured,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> LinkCost:
        bw = data.get("bytes_per_s")
        return LinkCost(
            str(data["device"]),
            float(data.get("latency_s") or 0.0),
            math.inf if bw is None else float(bw),
            bool(data.get("measured", False)),
        )


def fit_link(device: str, samples: list[tuple[int, float]]) -> LinkCost:
    """Least-squares ``t = latency + n / bandwidth`` over (bytes, seconds) samples; both kept >= 0."""
    if len(samples) < 2:
        raise DeviceError(f"{device}: need copies of at least two sizes to fit latency and bandwidth")
    n = np.array([s[0] for s in samples], dtype=np.float64)
    t = np.array([s[1] for s in samples], dtype=np.float64)
    slope, intercept = np.polyfit(n, t, 1)
    if slope * n.max() <= 1e-9 * t.max():  # no visible size effect (fast or noisy copies): all latency
        return LinkCost(device, max(float(np.mean(t)), 0.0), math.inf, True)
    return LinkCost(device, max(float(intercept), 0.0), 1.0 / float(slope), True)


def measure_link(device: str, repeats: int = 5, sizes: tuple[int, ...] = PROBE_BYTES) -> LinkCost:
    """Time copies to and from ``device`` (the minimum of ``repeats`` per size and direction) and fit them."""
    spec = parse_device(device)
    if spec.kind in HOST_KINDS:
        return LinkCost(spec.name)
    if spec.kind != "opencl":
        raise DeviceError(
            f"measuring copies to {spec.name} is not supported (only opencl:N and host devices)"
        )
    from edgecnn.kernels.opencl.array import DeviceArray
    from edgecnn.kernels.opencl.runtime import get_device

    cl_device = get_device(spec.index)
    samples: list[tuple[int, float]] = []
    for nbytes in sizes:
        host = np.ones(nbytes // 4, np.float32)
        best_in = best_out = math.inf
        for _ in range(max(1, repeats)):
            start = time.perf_counter()
            array = DeviceArray.upload(cl_device, host)
            cl_device.finish()
            mid = time.perf_counter()
            array.get()
            best_in = min(best_in, mid - start)
            best_out = min(best_out, time.perf_counter() - mid)
        samples += [(nbytes, best_in), (nbytes, best_out)]
    return fit_link(spec.name, samples)
