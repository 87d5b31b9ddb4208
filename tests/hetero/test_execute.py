"""Partitioned concurrent execution: every split equals the single-device result, with copies timed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import edgecnn
from edgecnn.errors import DeviceError, InputError
from edgecnn.hetero.execute import PartitionedModel, run_partitioned
from edgecnn.hetero.partition import Partition
from edgecnn.hetero.profiles import ProfileError
from hetero.support import example_input, has_opencl

ZOO = ["lenet5", "alexnet", "mobilenetv2"]  # plain convs + FC; two-group convs + LRN; depthwise convs


def close(actual: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert actual.keys() == expected.keys()
    for name, value in expected.items():
        scale = float(np.abs(value).max()) or 1.0
        np.testing.assert_allclose(actual[name], value, rtol=1e-4, atol=1e-4 * scale)


@pytest.mark.parametrize("name", ZOO)
def test_cpu_and_reference_split_equals_cpu(name: str, zoo_file: Callable[[str], Path]) -> None:
    model = edgecnn.load(zoo_file(name), threads=1)
    x = example_input(model)
    expected = model.run(x)
    with PartitionedModel(model, Partition({"cpu": 0.7, "reference": 0.3}), x) as runner:
        split = [p for p in runner.steps if len(p.pieces) > 1]
        assert split, "no layer was split"
        assert {p.device for part in split for p in part.pieces} == {"cpu", "reference"}
        close(runner.run(x), expected)
        close(runner.run(x), expected)  # prepared once, run many
        stats = runner.stats
    assert stats.runs == 2 and stats.wall_s > 0
    assert stats.devices["reference"].pieces >= 2 * len(split)
    assert stats.devices["cpu"].compute_s > 0


@pytest.mark.skipif(not has_opencl(), reason="needs pyopencl and an OpenCL device (PoCL)")
@pytest.mark.parametrize("name", ["alexnet", "mobilenetv2"])
def test_cpu_and_opencl_split_equals_cpu(name: str, zoo_file: Callable[[str], Path]) -> None:
    model = edgecnn.load(zoo_file(name), threads=1)
    x = example_input(model)
    with PartitionedModel(model, Partition({"cpu": 0.5, "opencl:0": 0.5}), x) as runner:
        kernels = {p.kernel.name for part in runner.steps for p in part.pieces if p.device == "opencl:0"}
        assert any(k.startswith("opencl_") for k in kernels), kernels
        close(runner.run(x), model.run(x))
        opencl = runner.stats.devices["opencl:0"]
    assert opencl.upload_s > 0 and opencl.download_s > 0 and opencl.compute_s > 0


def test_shares_set_channel_ranges(zoo_file: Callable[[str], Path]) -> None:
    model = edgecnn.load(zoo_file("alexnet"), threads=1)
    x = example_input(model)
    with PartitionedModel(model, Partition({"reference": 1.0, "cpu": 3.0}), x) as runner:
        assert runner.partition.lead == "cpu"
        rows = runner.layers()
    first = rows[0]
    assert first["op"] in ("Conv", "FusedConv")
    total = int(str(first["devices"]["cpu"]).split(":")[1])  # reference first: 0:a, cpu a:total
    lo, hi = (int(v) for v in str(first["devices"]["reference"]).split(":"))
    assert lo == 0 and hi == round(total / 4)
    unsplit = [r for r in rows if r["op"] in ("MaxPool", "LRN")]
    assert unsplit and all(r["devices"] == {"cpu": "all"} for r in unsplit)


def test_layer_override_runs_whole_layer_elsewhere(zoo_file: Callable[[str], Path]) -> None:
    model = edgecnn.load(zoo_file("lenet5"), threads=1)
    x = example_input(model)
    plan = model.plan_for(x)
    conv, pool = plan.steps[0].node.name, plan.steps[1].node.name
    partition = Partition({"cpu": 0.5, "reference": 0.5}, {conv: "reference", pool: "reference"})
    with PartitionedModel(model, partition, x) as runner:
        rows = {r["node"]: r for r in runner.layers()}
        assert rows[conv]["devices"] == {"reference": "all"}
        assert rows[pool]["kernels"] == {"reference": "reference"}
        close(runner.run(x), model.run(x))


def test_single_device_partition_equals_model(zoo_file: Callable[[str], Path]) -> None:
    model = edgecnn.load(zoo_file("alexnet"), threads=1)
    x = example_input(model)
    close(run_partitioned(model, Partition({"cpu": 1.0}), x), model.run(x))


def test_refusals(zoo_file: Callable[[str], Path]) -> None:
    model = edgecnn.load(zoo_file("lenet5"), threads=1)
    x = example_input(model)
    with pytest.raises(DeviceError):
        PartitionedModel(model, Partition({"cpu": 1.0, "opencl:99": 1.0}), x)
    with pytest.raises(ProfileError, match="not a set of the partition"):
        Partition({"cpu": 1.0}, {"conv": "reference"})
    with pytest.raises(ProfileError):
        Partition({"cpu": 0.0})
    runner = PartitionedModel(model, Partition({"cpu": 1.0, "reference": 1.0}), x)
    with runner, pytest.raises(InputError, match="prepared for input shapes"):
        runner.run(np.zeros((2, *x.shape[1:]), np.float32))


@pytest.mark.skipif(not has_opencl(), reason="needs pyopencl and an OpenCL device (PoCL)")
def test_opencl_lead_keeps_whole_layers_on_the_device(zoo_file: Callable[[str], Path]) -> None:
    model = edgecnn.load(zoo_file("alexnet"), threads=1)
    x = example_input(model)
    plan = model.plan_for(x)
    names = [s.node.name for s in plan.steps]
    everything_on_opencl = Partition({"opencl:0": 1.0, "cpu": 0.5}, {n: ("opencl:0",) for n in names})
    with PartitionedModel(model, everything_on_opencl, x) as runner:
        close(runner.run(x), model.run(x))
        stats = runner.stats.devices
    assert stats["cpu"].pieces == 0 and stats["opencl:0"].pieces == len(names)
    split_lead = Partition({"opencl:0": 1.0, "cpu": 0.5})
    with PartitionedModel(model, split_lead, x) as runner:
        assert runner.partition.lead == "opencl:0"
        close(runner.run(x), model.run(x))


def test_unoptimised_model_splits_plain_convs(zoo_file: Callable[[str], Path]) -> None:
    from edgecnn.model import Model
    from edgecnn.runtime.options import RuntimeOptions

    loaded = edgecnn.load(zoo_file("alexnet"), threads=1)
    plain = Model(loaded.graph, RuntimeOptions.resolve(1, "cpu", optimize=False))
    x = example_input(plain)
    with PartitionedModel(plain, Partition({"cpu": 0.6, "reference": 0.4}), x) as runner:
        split_ops = {part.step.node.op for part in runner.steps if len(part.pieces) > 1}
        assert split_ops == {"Conv", "Gemm"}
        close(runner.run(x), plain.run(x))
