"""Small models run on one thread (runtime/serial.py): the rule, and that Model follows it per plan."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

from edgecnn.bench.zoo import build_model
from edgecnn.importers import load_graph
from edgecnn.ir.graph import Graph
from edgecnn.kernels.cpu.tuning_record import DEFAULT_CPU_TUNING, using_cpu_tuning
from edgecnn.model import Model
from edgecnn.runtime import serial
from edgecnn.runtime.options import RuntimeOptions

pytestmark = pytest.mark.serial_rule


@pytest.fixture(scope="module")
def lenet(tmp_path_factory: pytest.TempPathFactory) -> Graph:
    path: Path = tmp_path_factory.mktemp("zoo") / "lenet5.onnx"
    onnx.save(build_model("lenet5"), str(path))
    return load_graph(path)


def test_plan_macs_counts_the_convolutions_and_dense_layers(lenet: Graph) -> None:
    model = Model(lenet, RuntimeOptions.resolve(threads=2))
    plan = model.plan_for(np.zeros((1, 1, 28, 28), np.float32))
    # LeNet-5 (28x28 input, conv1 padded by 2): conv 6x(5x5) on 28x28, conv 16x(6x5x5) on 10x10, then 400->120->84->10
    expected = 6 * 25 * 28 * 28 + 16 * 150 * 10 * 10 + 400 * 120 + 120 * 84 + 84 * 10
    assert serial.plan_macs(plan) == expected


def test_small_plans_run_on_one_thread_and_large_ones_on_all(lenet: Graph) -> None:
    model = Model(lenet, RuntimeOptions.resolve(threads=2))
    small = model.plan_for(np.zeros((1, 1, 28, 28), np.float32))
    assert serial.run_threads(small, 2) == 1
    assert serial.run_threads(small, 1) == 1
    with using_cpu_tuning(replace(DEFAULT_CPU_TUNING, serial_model_macs=serial.plan_macs(small))):
        assert serial.run_threads(small, 2) == 2  # at the threshold: worth the second thread
        assert serial.run_threads(small, 3) == 3


@pytest.mark.parametrize("threshold, expected", [(None, 1), (0, 2)])
def test_model_runs_a_small_plan_on_one_thread(lenet: Graph, threshold: int | None, expected: int) -> None:
    """The prepared run (and with it every kernel's thread budget) takes the rule's count; with the
    rule off it keeps the options' threads. Results are the same either way."""
    limit = DEFAULT_CPU_TUNING.serial_model_macs if threshold is None else threshold
    x = np.random.default_rng(0).standard_normal((1, 1, 28, 28)).astype(np.float32)
    with using_cpu_tuning(replace(DEFAULT_CPU_TUNING, serial_model_macs=limit)):
        model = Model(lenet, RuntimeOptions.resolve(threads=2))
        got = model(x)
    (plan,) = model._plans.values()
    assert plan.threads == expected
    reference = Model(lenet, RuntimeOptions.resolve(threads=1))(x)
    np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-6)


def test_a_larger_batch_of_the_same_model_may_use_every_thread(lenet: Graph) -> None:
    """The rule is per plan: at batch 64 LeNet-5 has 64x the work of one image."""
    options = RuntimeOptions.resolve(threads=2, batch_parallel="never")
    probe = Model(lenet, options).plan_for(np.zeros((1, 1, 28, 28), np.float32))
    model = Model(lenet, options)
    with using_cpu_tuning(replace(DEFAULT_CPU_TUNING, serial_model_macs=50 * serial.plan_macs(probe))):
        one = model.plan_for(np.zeros((1, 1, 28, 28), np.float32))
        many = model.plan_for(np.zeros((64, 1, 28, 28), np.float32))
    assert one.threads == 1
    assert many.threads == 2
