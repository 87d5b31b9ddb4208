"""The load sampler and the 50 ms trace: utilisation from CPU times, cpufreq and meter columns,
the sampling period, events in time order in the CSV."""

from __future__ import annotations

import csv
import itertools
import time
from pathlib import Path

import pytest

from edgecnn.monitor import LoadSampler, TraceRecorder


class FakeTimes:
    """Two cores' (busy, total) CPU seconds; each read advances core 0 fully busy, core 1 a quarter."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> list[tuple[float, float]]:
        self.reads += 1
        return [(1.0 * self.reads, 1.0 * self.reads), (0.25 * self.reads, 1.0 * self.reads)]


class FakeMeter:
    name = "fake"
    measured = True
    describes = "a meter that gains 2 J per read"

    def __init__(self) -> None:
        self.joules = 0.0

    def energy_j(self) -> float:
        self.joules += 2.0
        return self.joules


def cpufreq_tree(root: Path, khz: list[int]) -> Path:
    for i, value in enumerate(khz):
        folder = root / f"cpu{i}" / "cpufreq"
        folder.mkdir(parents=True)
        (folder / "scaling_cur_freq").write_text(f"{value}\n")
    return root


def test_sampler_differences_cpu_times_and_reads_cpufreq(tmp_path: Path) -> None:
    sampler = LoadSampler(cpu_times=FakeTimes(), cpufreq_root=cpufreq_tree(tmp_path, [1400000, 600000]))
    sample = sampler.sample(0.05)
    assert sampler.cores == 2
    assert sample.cpu_percent == (100.0, 25.0)
    assert sample.cpu_mhz == (1400.0, 600.0)
    assert sample.watts is None and sample.gpu_percent == ()


def test_sampler_without_cpufreq_on_every_core_reports_none(tmp_path: Path) -> None:
    sampler = LoadSampler(cpu_times=FakeTimes(), cpufreq_root=cpufreq_tree(tmp_path, [1400000]))
    assert sampler.freq_files is None
    assert sampler.sample(0.05).cpu_mhz is None


def test_sampler_power_is_the_meter_difference_over_the_interval(tmp_path: Path) -> None:
    sampler = LoadSampler(cpu_times=FakeTimes(), cpufreq_root=tmp_path, meter=FakeMeter())
    assert sampler.sample(0.05).watts is None  # no previous sample time to divide by
    assert sampler.sample(0.10).watts == pytest.approx(2.0 / 0.05)


def test_the_real_sampler_sees_every_core() -> None:
    sample = LoadSampler().sample(0.05)
    assert len(sample.cpu_percent) >= 1
    assert all(0.0 <= p <= 100.0 for p in sample.cpu_percent)


def read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def test_trace_samples_every_50_ms_and_writes_events_in_time_order(tmp_path: Path) -> None:
    sampler = LoadSampler(
        cpu_times=FakeTimes(),
        cpufreq_root=cpufreq_tree(tmp_path / "sys", [800000, 900000]),
        meter=FakeMeter(),
    )
    trace = tmp_path / "trace.csv"
    recorder = TraceRecorder(sampler, csv_path=trace)
    recorder.start()
    for index in range(5):
        recorder.event("frame", index)
        recorder.event("inference_start", index)
        time.sleep(0.03)
        recorder.event("inference_end", index, latency_ms=30.0)
    time.sleep(0.5)
    recorder.stop()

    columns, rows = read_rows(trace)
    assert columns == [
        "time_s", "kind", "cpu0_pct", "cpu1_pct", "cpu0_mhz", "cpu1_mhz", "power_w", "frame", "latency_ms",
    ]  # fmt: skip
    times = [float(row["time_s"]) for row in rows]
    assert times == sorted(times)
    samples = [row for row in rows if row["kind"] == "sample"]
    sample_times = [float(row["time_s"]) for row in samples]
    assert len(samples) == recorder.count
    assert len(samples) >= 0.65 / 0.05 * 0.7  # about 13 in 0.65 s; this machine may run late
    gaps = [b - a for a, b in itertools.pairwise(sample_times)]
    assert sorted(gaps)[len(gaps) // 2] == pytest.approx(0.05, abs=0.01)  # the median period
    assert samples[0]["cpu0_pct"] == "100.0" and samples[0]["cpu1_pct"] == "25.0"
    assert samples[0]["cpu0_mhz"] == "800" and samples[0]["frame"] == ""
    ends = [row for row in rows if row["kind"] == "inference_end"]
    assert [row["frame"] for row in ends] == ["0", "1", "2", "3", "4"]
    assert all(row["latency_ms"] == "30.000" and row["cpu0_pct"] == "" for row in ends)
    kinds = [row["kind"] for row in rows if row["kind"] != "sample"]
    assert kinds[:3] == ["frame", "inference_start", "inference_end"]


def test_trace_keeps_recent_samples_for_the_page(tmp_path: Path) -> None:
    recorder = TraceRecorder(LoadSampler(cpu_times=FakeTimes(), cpufreq_root=tmp_path), period=0.01, keep=5)
    recorder.start()
    time.sleep(0.2)
    recorder.stop()
    recent = recorder.samples_since(0)
    assert len(recent) == 5
    assert [n for n, _ in recent] == list(range(recorder.count - 4, recorder.count + 1))
    assert recorder.samples_since(recorder.count) == []


def test_unknown_event_and_bad_period_are_refused(tmp_path: Path) -> None:
    sampler = LoadSampler(cpu_times=FakeTimes(), cpufreq_root=tmp_path)
    with pytest.raises(ValueError, match="period"):
        TraceRecorder(sampler, period=0)
    with pytest.raises(ValueError, match="unknown trace event"):
        TraceRecorder(sampler).event("lunch", 0)
