"""The fine-grained extension: per-layer cost arithmetic, per-layer device subsets, seed 001's example."""

from __future__ import annotations

import pytest

from edgecnn.hetero.finegrained import (
    LayerCost,
    coarse_choice,
    fine_grained,
    option_cost,
    subsets,
    total_cost,
)
from edgecnn.hetero.partition import Partition
from edgecnn.hetero.profiles import ProfileError
from edgecnn.hetero.report import SEED_PROFILES, seed_layer_costs, seed_table, write_section
from edgecnn.hetero.search import search_combination
from edgecnn.hetero.transfer import LinkCost

WATTS = {"cpu": 4.0, "gpu": 1.0}
PARTITION = Partition({"cpu": 1.0, "gpu": 1.0})


def conv(name: str = "conv", units: int | None = 10, cpu: float = 1.0, gpu: float = 1.0) -> LayerCost:
    return LayerCost(name, {"cpu": cpu, "gpu": gpu}, in_bytes=1000, out_bytes=2000, units=units)


def test_option_cost_arithmetic() -> None:
    link = {"cpu": LinkCost("cpu"), "gpu": LinkCost("gpu", latency_s=0.01, bytes_per_s=1e5)}
    # Whole on the gpu: copy the input in; the output stays there unless the run ends with this layer.
    whole_gpu = option_cost(conv(), ("gpu",), PARTITION, WATTS, link)
    assert whole_gpu.seconds == pytest.approx(1.0 + (0.01 + 0.01))
    assert whole_gpu.joules == pytest.approx(1.0 * whole_gpu.seconds)
    assert option_cost(conv(), ("gpu",), PARTITION, WATTS, link, last=True).seconds == pytest.approx(1.05)
    # After a layer whole on the gpu: its output is already there, or leaves it first.
    after_gpu = (conv("before"), ("gpu",))
    assert option_cost(conv(), ("gpu",), PARTITION, WATTS, link, after_gpu).seconds == pytest.approx(1.0)
    on_cpu = option_cost(conv(), ("cpu",), PARTITION, WATTS, link, after_gpu)
    assert on_cpu.seconds == pytest.approx(0.03 + 1.0)
    assert on_cpu.joules == pytest.approx(1.0 * 0.03 + 4.0 * 1.0)
    split = option_cost(conv(), ("cpu", "gpu"), PARTITION, WATTS, link)
    gpu_busy = 0.5 + (0.01 + 0.01) + (0.01 + 0.01)
    assert split.seconds == pytest.approx(max(0.5, gpu_busy))
    assert split.joules == pytest.approx(4.0 * 0.5 + 1.0 * gpu_busy)
    with pytest.raises(ProfileError, match="cannot be split"):
        option_cost(conv(units=None), ("cpu", "gpu"), PARTITION, WATTS, link)


def test_subsets_and_coarse_choice() -> None:
    assert subsets(["a", "b"]) == [("a",), ("b",), ("a", "b")]
    assert len(subsets(list("abcdefgh"))) == 9  # many devices: singles and all
    layers = [conv("c"), conv("pool", units=None)]
    assert coarse_choice(layers, Partition({"gpu": 1.0, "cpu": 2.0})) == {
        "c": ("gpu", "cpu"),
        "pool": ("cpu",),
    }


def test_costly_copies_keep_layers_on_the_host() -> None:
    layers = [conv(f"c{i}", cpu=1.0, gpu=1.0) for i in range(3)]
    free = fine_grained(layers, PARTITION, {"cpu": 1.0, "gpu": 1.0})
    assert free.changed == () and free.improvement == pytest.approx(1.0)  # even split is best without copies
    slow = {"gpu": LinkCost("gpu", latency_s=10.0)}
    found = fine_grained(layers, PARTITION, {"cpu": 1.0, "gpu": 1.0}, slow)
    assert all(found.choice[layer.name] == ("cpu",) for layer in layers)
    assert found.fine.edp < found.coarse.edp and found.improvement > 1
    assert found.coarse_without_transfer.edp < found.coarse.edp
    assert found.partition.layer_devices == {f"c{i}": ("cpu",) for i in range(3)}


def test_consecutive_layers_on_one_device_copy_once() -> None:
    # Per-layer copies would make the gpu lose; resident activations make a run of gpu layers worth it.
    layers = [conv(f"c{i}", cpu=2.0, gpu=1.0) for i in range(4)]
    link = {"gpu": LinkCost("gpu", latency_s=0.6)}
    found = fine_grained(layers, PARTITION, {"cpu": 1.0, "gpu": 1.0}, link)
    assert all(option == ("gpu",) for option in found.choice.values())
    assert found.fine.seconds == pytest.approx(4 * 1.0 + 0.6 + 0.6)  # one copy in, one copy out


def test_layer_preferences_differ() -> None:
    # The gpu is fast on the first layer and slow on the second: each layer goes where it is cheap.
    layers = [conv("fast_on_gpu", cpu=4.0, gpu=0.5), conv("slow_on_gpu", cpu=0.5, gpu=4.0)]
    found = fine_grained(layers, PARTITION, {"cpu": 1.0, "gpu": 1.0})
    assert found.choice == {"fast_on_gpu": ("gpu",), "slow_on_gpu": ("cpu",)}
    assert found.fine.edp < min(e.edp for e in found.uniform.values())
    assert found.fine.edp == pytest.approx(
        total_cost(layers, found.choice, PARTITION, {"cpu": 1.0, "gpu": 1.0}).edp
    )


def test_seed_example_reproduces_algorithm_4_1() -> None:
    result = search_combination(SEED_PROFILES)
    layers = seed_layer_costs()
    perf = {n.name: n.perf for n in result.normalised}
    watts = {p.name: p.power for p in SEED_PROFILES}
    found = fine_grained(layers, Partition(perf), watts)
    # Same speed ratio on every layer and no copies: per-layer choice lands on Algorithm 4.1's set.
    assert {found.choice[layer.name] for layer in layers if layer.units} == {("gpu0", "gpu1")}
    assert found.coarse.edp / found.fine.edp == pytest.approx(3.74, abs=0.01)  # seed measured 3.67x
    rows = seed_table()
    assert any("assumed" in row for row in rows) and len(rows) == 14


def test_write_section_replaces_between_markers(tmp_path: object) -> None:
    from pathlib import Path

    doc = Path(str(tmp_path)) / "doc.md"
    doc.write_text("# title\n\nintro\n")
    write_section(doc, ["one"])
    write_section(doc, ["two"])
    text = doc.read_text()
    assert (
        text.startswith("# title")
        and "two" in text
        and "one" not in text
        and text.count("hetero-report:begin") == 1
    )


def test_scale_to_whole_inference_times() -> None:
    from edgecnn.hetero.finegrained import scale_to

    layers = [conv("a", cpu=1.0, gpu=3.0), conv("b", cpu=3.0, gpu=1.0)]
    scaled = scale_to(layers, {"cpu": 8.0, "gpu": 2.0})
    assert [layer.seconds["cpu"] for layer in scaled] == pytest.approx([2.0, 6.0])
    assert [layer.seconds["gpu"] for layer in scaled] == pytest.approx([1.5, 0.5])
    assert scaled[0].units == layers[0].units and scaled[1].out_bytes == layers[1].out_bytes


def test_devices_sharing_hardware_do_not_overlap() -> None:
    from edgecnn.hetero.measure import HOST_CPU, hardware_groups

    shared = {"cpu": "host", "gpu": "host"}
    split = option_cost(conv(), ("cpu", "gpu"), PARTITION, WATTS, {}, groups=shared)
    assert split.seconds == pytest.approx(0.5 + 0.5)  # busy times add: no gain from splitting
    assert option_cost(conv(), ("cpu", "gpu"), PARTITION, WATTS, {}).seconds == pytest.approx(0.5)
    layers = [conv(f"c{i}") for i in range(3)]
    found = fine_grained(layers, PARTITION, {"cpu": 1.0, "gpu": 1.0}, None, shared)
    assert found.fine.edp == pytest.approx(found.uniform[("cpu",)].edp)
    groups = hardware_groups(["cpu", "reference", "opencl:99"])
    assert groups == {"cpu": HOST_CPU, "reference": HOST_CPU, "opencl:99": "opencl:99"}
