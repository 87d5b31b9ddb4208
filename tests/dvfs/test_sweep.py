"""Frequency sweeps: Table 5.1's columns relative to the default governor, a measured sweep on a
fake tree with a fake meter, and `edgecnn sweep` end to end on a fake tree with the simulated
figures labelled as such; no frequency control or no measured meter stops it."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dvfs.fake_sysfs import LEVELS_KHZ, cpufreq_tree, read, snapshot
from edgecnn.cli.app import EXIT_ERROR, EXIT_USAGE, app
from edgecnn.dvfs.control import FrequencyControl
from edgecnn.dvfs.domains import select_domains
from edgecnn.dvfs.simulate import EXYNOS5422_A15
from edgecnn.dvfs.sweep import COLUMNS, DEFAULT, SweepRow, measured_rows, model_for_levels, table
from edgecnn.energy import EnergyReport

MODEL = Path(__file__).parents[2] / "src" / "edgecnn" / "data" / "simplecnn" / "face_binary_cls.onnx"


def test_relative_columns_follow_the_seed() -> None:
    default = SweepRow(
        DEFAULT, None, EnergyReport("m", True, "", 10, 13.2383, 18.7)
    )  # Table 5.1's row 1, x10
    top = SweepRow("fixed 543 MHz", 543, EnergyReport("m", True, "", 10, 12.0785, 20.6))
    rows = table([default, top])
    assert rows[0]["performance_gain"] == "" and rows[1]["fps"] == "0.828"
    assert rows[1]["performance_gain"] == "+9.60%" and rows[1]["energy_saving"] == "-10.16%"
    assert rows[1]["power_saving"] == "-20.74%" and list(rows[1]) == list(COLUMNS)


class FakeMeter:
    """Joules grow with the pinned frequency read from the fake tree: a meter that can tell levels apart."""

    name, measured, describes = "fake", True, "fake meter"

    def __init__(self, policy: Path) -> None:
        self.policy = policy
        self.joules = 0.0

    def energy_j(self) -> float:
        self.joules += int(read(self.policy / "scaling_max_freq")) * 1e-6
        return self.joules


def test_measured_sweep_pins_each_level_then_restores(tmp_path: Path) -> None:
    root = cpufreq_tree(tmp_path / "sys", userspace=False)
    before = snapshot(root)
    policy = root / "cpufreq" / "policy0"
    seen: list[str] = []
    domains = select_domains(None, [], cpufreq_root=root)
    with FrequencyControl(domains, journal=tmp_path / "j.json", log=print) as control:
        rows = measured_rows(
            lambda: seen.append(read(policy / "scaling_min_freq")),
            control,
            [LEVELS_KHZ[0], LEVELS_KHZ[-1]],
            FakeMeter(policy),
            inferences=3,
            warmup=1,
        )
    assert [r.policy for r in rows] == [DEFAULT, "fixed 800 MHz", "fixed 2000 MHz"]
    assert seen == [str(LEVELS_KHZ[0])] * 4 + [str(LEVELS_KHZ[0])] * 4 + [str(LEVELS_KHZ[-1])] * 4
    assert rows[2].report.joules > rows[1].report.joules and all(r.source == "measured" for r in rows)
    assert snapshot(root) == before


def test_model_moves_onto_another_table() -> None:
    moved = model_for_levels(EXYNOS5422_A15, list(LEVELS_KHZ))
    assert [lv.mhz for lv in moved.levels] == [800, 1200, 1600, 2000]
    assert moved.levels[-1].volts == EXYNOS5422_A15.levels[-1].volts
    assert moved.power(moved.top, 4) == pytest.approx(EXYNOS5422_A15.power(EXYNOS5422_A15.top, 4))


def test_sweep_command_on_a_fake_tree_is_labelled_simulated(tmp_path: Path) -> None:
    root = cpufreq_tree(tmp_path / "sys")
    before = snapshot(root)
    out_csv, out_png = tmp_path / "sweep.csv", tmp_path / "sweep.png"
    args = ["sweep", str(MODEL), "-n", "3", "--simulate", "--cpufreq-root", str(root)]
    args += ["--journal", str(tmp_path / "j.json"), "--csv", str(out_csv), "--plot", str(out_png)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "SIMULATED" in result.output and f"pinned and restored on {root}" in result.output
    with open(out_csv, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["policy"] for r in rows] == [DEFAULT, *(f"fixed {k // 1000} MHz" for k in LEVELS_KHZ)]
    assert {r["source"] for r in rows} == {"simulated"} and tuple(rows[0]) == COLUMNS
    assert float(rows[-1]["fps"]) > float(rows[1]["fps"])
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {k: v for k, v in snapshot(root).items() if "setspeed" not in k} == {
        k: v for k, v in before.items() if "setspeed" not in k
    }


def test_sweep_stops_without_frequency_control_or_a_measured_meter(tmp_path: Path) -> None:
    none = CliRunner().invoke(app, ["sweep", str(MODEL), "--cpufreq-root", str(tmp_path / "none")])
    assert none.exit_code == EXIT_ERROR and "nothing to sweep" in none.output
    root = cpufreq_tree(tmp_path / "sys")
    args = ["sweep", str(MODEL), "--cpufreq-root", str(root), "--meter", "estimate"]
    estimate = CliRunner().invoke(app, args)
    assert estimate.exit_code == EXIT_ERROR and "measurements only" in estimate.output
    bad = CliRunner().invoke(app, ["sweep", str(MODEL), "--simulate", "--levels", "123"])
    assert bad.exit_code == EXIT_USAGE and "no level at 123" in bad.output
