"""Energy meters against fake sysfs trees, and the figures PowerMonitor derives."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgecnn.cli.app import EXIT_ERROR, app
from edgecnn.cli.demo_cmd import bundled
from edgecnn.energy import (
    CpuTimeEstimate,
    EnergyReport,
    HwmonMeter,
    PowerMonitor,
    PowerSupplyMeter,
    RaplMeter,
    open_meter,
)
from edgecnn.errors import DeviceError


def write(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n")


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rapl_sums_packages_and_handles_wrap_around(tmp_path: Path) -> None:
    for zone, start in (("intel-rapl:0", 999_000_000), ("intel-rapl:1", 5_000_000)):
        write(tmp_path / zone / "energy_uj", start)
        write(tmp_path / zone / "max_energy_range_uj", 999_999_999)
        write(tmp_path / zone / "name", f"package-{zone[-1]}")
    write(tmp_path / "intel-rapl:0:0" / "energy_uj", 1)  # a subzone (core): not double counted
    meter = RaplMeter(tmp_path)
    assert meter.describes.startswith("package-0, package-1")
    write(tmp_path / "intel-rapl:0" / "energy_uj", 1_000_000)  # wrapped at 1e9: +2,000,000 uJ
    write(tmp_path / "intel-rapl:1" / "energy_uj", 7_000_000)  # +2,000,000 uJ
    assert meter.energy_j() == pytest.approx(4.0)
    write(tmp_path / "intel-rapl:0" / "energy_uj", 2_000_000)
    assert meter.energy_j() == pytest.approx(5.0)


def test_hwmon_prefers_energy_counters_else_integrates_power(tmp_path: Path) -> None:
    write(tmp_path / "e" / "hwmon0" / "energy1_input", 10_000_000)
    write(tmp_path / "e" / "hwmon0" / "name", "ina231")
    meter = HwmonMeter(tmp_path / "e")
    write(tmp_path / "e" / "hwmon0" / "energy1_input", 12_500_000)
    assert meter.energy_j() == pytest.approx(2.5)
    assert "ina231/energy1" in meter.describes

    clock = FakeClock()
    write(tmp_path / "p" / "hwmon1" / "power1_input", 2_000_000)  # 2 W
    meter = HwmonMeter(tmp_path / "p", clock=clock)
    write(tmp_path / "p" / "hwmon1" / "power1_input", 4_000_000)  # 4 W after 2 s: trapezoid 6 J
    clock.now += 2
    assert meter.energy_j() == pytest.approx(6.0)
    assert "integrated" in meter.describes


def test_power_supply_voltage_times_current(tmp_path: Path) -> None:
    clock = FakeClock()
    write(tmp_path / "battery" / "voltage_now", 4_000_000)  # 4 V
    write(tmp_path / "battery" / "current_now", -500_000)  # 0.5 A discharging
    meter = PowerSupplyMeter(tmp_path, clock=clock)
    clock.now += 10
    assert meter.energy_j() == pytest.approx(20.0)


def test_missing_sensors_are_device_errors(tmp_path: Path) -> None:
    for meter in (RaplMeter, HwmonMeter, PowerSupplyMeter):
        with pytest.raises(DeviceError, match=str(tmp_path)):
            meter(tmp_path)
    with pytest.raises(DeviceError, match="unknown energy meter"):
        open_meter("thermocouple")
    with pytest.raises(DeviceError, match="no energy meter is known for device 'tpu:0'"):
        open_meter(device="tpu:0")


def test_auto_never_measures_a_cpu_run_with_a_gpu_meter() -> None:
    assert open_meter(device="cpu").name in ("rapl", "hwmon", "power_supply", "estimate")


def test_unreadable_counter(tmp_path: Path) -> None:
    write(tmp_path / "intel-rapl:0" / "energy_uj", 5)
    meter = RaplMeter(tmp_path)
    write(tmp_path / "intel-rapl:0" / "energy_uj", "garbage")
    with pytest.raises(DeviceError, match="cannot read the energy counter"):
        meter.energy_j()


def test_estimate_is_labelled_and_grows_with_cpu_time() -> None:
    meter = CpuTimeEstimate(watts_per_busy_core=10.0)
    assert not meter.measured and "estimate" in meter.describes
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    assert meter.energy_j() >= 0.5 * 0.9


def test_report_figures() -> None:
    report = EnergyReport("rapl", True, "x", inferences=10, seconds=2.0, joules=4.0)
    assert report.joules_per_inference == pytest.approx(0.4)
    assert report.average_watts == pytest.approx(2.0)
    assert report.fps == pytest.approx(5.0)
    assert report.edp == pytest.approx(0.4 * 0.2)
    assert report.ppw == pytest.approx(2.5)
    assert report.ppj == pytest.approx(1 / 0.08)


def test_monitor_samples_and_writes_csv(tmp_path: Path) -> None:
    meter = CpuTimeEstimate(watts_per_busy_core=1.0, idle_watts=3.0)
    with PowerMonitor(meter, interval=0.01) as monitor:
        time.sleep(0.1)
    assert len(monitor.samples) >= 4
    assert [s.seconds for s in monitor.samples] == sorted(s.seconds for s in monitor.samples)
    report = monitor.report(5)
    assert report.joules == pytest.approx(monitor.samples[-1].joules)
    assert report.average_watts >= 3.0 * 0.9
    monitor.write_csv(tmp_path / "power.csv")
    rows = list(csv.reader((tmp_path / "power.csv").open()))
    assert rows[0] == ["seconds", "joules", "watts"] and len(rows) == len(monitor.samples) + 1


def test_energy_command_says_which_meter(tmp_path: Path) -> None:
    model = bundled("simplecnn/face_binary_cls.onnx")
    result = CliRunner().invoke(
        app,
        ["energy", str(model), "--iterations", "3", "--meter", "estimate", "--csv", str(tmp_path / "p.csv")],
    )
    assert result.exit_code == 0, result.output
    assert "meter estimate — ESTIMATED" in result.stdout and "mJ/inference" in result.stdout
    assert (tmp_path / "p.csv").exists()
    bad = CliRunner().invoke(app, ["energy", str(model), "--meter", "rapl"])
    if bad.exit_code != 0:  # no RAPL on this machine: a clear one-line error
        assert bad.exit_code == EXIT_ERROR and bad.stderr.startswith("error: ")


def test_nvml_meter_reads_the_board_of_the_named_cuda_device(monkeypatch: pytest.MonkeyPatch) -> None:
    import edgecnn.energy.meters as meters

    opened: list[int] = []

    class FakeNvml:
        name = "nvml"

        def __init__(self, index: int = 0) -> None:
            opened.append(index)

    monkeypatch.setattr(meters, "NvmlMeter", FakeNvml)
    assert open_meter(device="cuda:1").name == "nvml"
    assert open_meter("nvml", device="cuda:3").name == "nvml"
    assert open_meter(device="cuda").name == "nvml"
    assert opened == [1, 3, 0]
