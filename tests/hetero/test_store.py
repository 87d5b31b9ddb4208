"""Saved plans: model hash, key, round trip, and damaged or foreign files recognised (never a crash)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgecnn.hetero.partition import Partition
from edgecnn.hetero.profiles import DeviceProfile
from edgecnn.hetero.store import SavedPlan, load_plan, model_hash, plan_path, plans_dir, save_plan
from edgecnn.hetero.transfer import LinkCost
from edgecnn.ir.graph import Graph, Node, TensorSpec
from edgecnn.ops.conv import ConvAttrs

SHAPES = {"x": (1, 2, 5, 5)}


def graph(weight: float = 1.0, stride: int = 1) -> Graph:
    w = np.full((3, 2, 3, 3), weight, np.float32)
    node = Node("Conv", "conv", ["x", "w"], ["y"], ConvAttrs(strides=(stride, stride)))
    return Graph([TensorSpec("x", "float32", (1, 2, 5, 5))], ["y"], [node], {"w": w})


def saved(digest: str, devices: tuple[str, ...] = ("cpu", "opencl:0")) -> SavedPlan:
    return SavedPlan(
        model_sha256=digest,
        devices=devices,
        input_shapes=dict(SHAPES),
        profiles=(
            DeviceProfile("cpu", 0.5, joules=2.0),
            DeviceProfile("opencl:0", 1.0, joules=1.0, estimated=True),
        ),
        meters={"cpu": "rapl", "opencl:0": "estimate"},
        partition=Partition({"cpu": 2.0, "opencl:0": 1.0}),
        fine=Partition({"cpu": 2.0, "opencl:0": 1.0}, {"conv": "cpu"}),
        links={"opencl:0": LinkCost("opencl:0", 5e-5, 2e9, True), "cpu": LinkCost("cpu")},
        fine_estimates={"fine": {"seconds": 1.0, "joules": 1.0, "edp": 1.0}},
    )


def test_model_hash_follows_weights_and_attributes() -> None:
    assert model_hash(graph()) == model_hash(graph())
    assert model_hash(graph()) != model_hash(graph(weight=2.0))
    assert model_hash(graph()) != model_hash(graph(stride=2))


def test_plans_live_in_the_cache_directory(private_cache: Path) -> None:
    assert plans_dir() == private_cache / "plans"


def test_round_trip_and_device_order() -> None:
    digest = model_hash(graph())
    path = save_plan(saved(digest))
    assert path.parent.name == "plans" and path.exists()
    plan, warning = load_plan(digest, ["opencl:0", "cpu"], SHAPES)  # the device order does not matter
    assert warning is None and plan is not None
    assert plan.partition.shares == pytest.approx({"cpu": 2 / 3, "opencl:0": 1 / 3})
    assert plan.fine is not None and plan.fine.layer_devices == {"conv": ("cpu",)}
    assert plan.profiles[1].estimated and plan.profiles[0].energy == pytest.approx(2.0)
    assert plan.links["opencl:0"].seconds(2e9) == pytest.approx(1 + 5e-5)
    assert plan.links["cpu"].seconds(1e9) == 0.0


def test_absent_plan_is_silent() -> None:
    assert load_plan("0" * 64, ["cpu"], SHAPES) == (None, None)


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # truncated
        lambda text: "\xff\xfe not json",
        lambda text: text.replace('"version": 1', '"version": 99'),
        lambda text: text.replace('"seconds": 0.5', '"seconds": -1'),
        lambda text: text.replace('"shares": {', '"shares": {"gpu": "fast", '),
        lambda text: json.dumps([1, 2, 3]),
    ],
)
def test_damaged_plan_warns(damage: object) -> None:
    digest = model_hash(graph())
    path = save_plan(saved(digest))
    path.write_text(damage(path.read_text()))  # type: ignore[operator]
    plan, warning = load_plan(digest, ["cpu", "opencl:0"], SHAPES)
    assert plan is None and warning is not None and str(path) in warning


def test_foreign_plan_under_our_key_warns() -> None:
    digest = model_hash(graph())
    other = saved("f" * 64)
    path = plan_path(digest, ["cpu", "opencl:0"], SHAPES)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(other.to_json()))
    plan, warning = load_plan(digest, ["cpu", "opencl:0"], SHAPES)
    assert plan is None and warning is not None and "another model" in warning


def test_keys_differ_by_devices_and_shapes() -> None:
    digest = model_hash(graph())
    assert plan_path(digest, ["cpu"], SHAPES) != plan_path(digest, ["cpu", "opencl:0"], SHAPES)
    assert plan_path(digest, ["cpu"], SHAPES) != plan_path(digest, ["cpu"], {"x": (2, 2, 5, 5)})


def test_plan_naming_other_devices_warns() -> None:
    digest = model_hash(graph())
    plan = saved(digest)
    stray = SavedPlan(**{**plan.__dict__, "fine": Partition({"cpu": 1.0, "cuda:0": 1.0})})
    save_plan(stray)
    found, warning = load_plan(digest, ["cpu", "opencl:0"], SHAPES)
    assert found is None and warning is not None and "outside" in warning
