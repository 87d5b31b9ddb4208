"""Copy-cost model: exact fits of synthetic samples, host devices free, PoCL copies measured."""

from __future__ import annotations

import math

import pytest

from edgecnn.errors import DeviceError
from edgecnn.hetero.transfer import LinkCost, fit_link, measure_link
from hetero.support import has_opencl


def test_fit_recovers_latency_and_bandwidth() -> None:
    samples = [(n, 20e-6 + n / 4e9) for n in (4096, 65536, 1 << 22)]
    link = fit_link("gpu", samples)
    assert link.latency_s == pytest.approx(20e-6, rel=1e-6)
    assert link.bytes_per_s == pytest.approx(4e9, rel=1e-6)
    assert link.seconds(4e9) == pytest.approx(1 + 20e-6)
    assert link.seconds(0) == 0.0


def test_fit_without_size_effect_is_latency_only() -> None:
    link = fit_link("gpu", [(100, 1e-5), (1000, 1e-5)])
    assert math.isinf(link.bytes_per_s) and link.latency_s == pytest.approx(1e-5)
    with pytest.raises(DeviceError):
        fit_link("gpu", [(100, 1e-5)])


def test_host_devices_copy_for_free() -> None:
    for name in ("cpu", "reference"):
        link = measure_link(name)
        assert link.seconds(1 << 30) == 0.0 and not link.measured
    assert LinkCost.from_json(LinkCost("cpu").to_json()) == LinkCost("cpu")
    with pytest.raises(DeviceError, match="not supported"):
        measure_link("cuda:0")


@pytest.mark.skipif(not has_opencl(), reason="needs pyopencl and an OpenCL device (PoCL)")
def test_opencl_copies_are_measured() -> None:
    link = measure_link("opencl:0", repeats=2, sizes=(4096, 1 << 20))
    assert link.measured and link.seconds(1 << 20) > 0
