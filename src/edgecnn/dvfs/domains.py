"""Frequency domains: a Linux cpufreq policy (a set of CPUs that share a clock) or a devfreq
device (an integrated GPU, an NPU, a memory bus). Each lists its frequency levels and governors,
reads its state, and pins a level, recording every original value in the journal before the write
that changes it. Frequencies are in kHz throughout (devfreq's Hz are converted)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgecnn.dvfs.journal import Journal
from edgecnn.dvfs.sysfs import read_int, read_text, read_words, write_text
from edgecnn.errors import DeviceError

CPUFREQ_ROOT = Path("/sys/devices/system/cpu")
DEVFREQ_ROOT = Path("/sys/class/devfreq")


@dataclass(frozen=True)
class DomainState:
    name: str
    governor: str
    current_khz: int | None
    min_khz: int
    max_khz: int


class CpufreqPolicy:
    """One cpufreq policy directory: pins through the ``userspace`` governor's scaling_setspeed
    where that governor is available (an exact frequency), else through scaling_min_freq and
    scaling_max_freq under the running governor (intel_pstate and amd-pstate have no userspace)."""

    kind = "cpufreq"

    def __init__(self, directory: Path, cpus: tuple[int, ...]) -> None:
        self.directory = directory
        self.cpus = cpus
        self.name = f"cpu{','.join(map(str, cpus))}"

    def _file(self, name: str) -> Path:
        return self.directory / name

    def frequencies(self) -> list[int]:
        """Available levels, lowest first (the hardware limits where no table is exposed)."""
        table = self._file("scaling_available_frequencies")
        if table.exists():
            return sorted({int(w) for w in read_words(table)})
        return sorted({read_int(self._file("cpuinfo_min_freq")), read_int(self._file("cpuinfo_max_freq"))})

    def governors(self) -> list[str]:
        return read_words(self._file("scaling_available_governors"))

    def state(self) -> DomainState:
        current = self._file("scaling_cur_freq")
        return DomainState(
            name=self.name,
            governor=read_text(self._file("scaling_governor")),
            current_khz=read_int(current) if current.exists() else None,
            min_khz=read_int(self._file("scaling_min_freq")),
            max_khz=read_int(self._file("scaling_max_freq")),
        )

    def pin(self, khz: int, journal: Journal) -> None:
        """Holds every CPU of the policy at ``khz`` until the journal is restored."""
        check_level(self, khz)
        if "userspace" in self.governors():
            change(self._file("scaling_governor"), "userspace", journal)
            write_text(self._file("scaling_setspeed"), str(khz))  # meaningless once restored
            return
        pin_bounds(self._file("scaling_min_freq"), self._file("scaling_max_freq"), str(khz), journal)


class DevfreqDevice:
    """One /sys/class/devfreq device: pinned through min_freq and max_freq (in Hz), which every
    devfreq governor honours."""

    kind = "devfreq"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.name = directory.name
        self.cpus: tuple[int, ...] = ()

    def _file(self, name: str) -> Path:
        return self.directory / name

    def frequencies(self) -> list[int]:
        return sorted({int(w) // 1000 for w in read_words(self._file("available_frequencies"))})

    def governors(self) -> list[str]:
        return read_words(self._file("available_governors"))

    def state(self) -> DomainState:
        current = self._file("cur_freq")
        return DomainState(
            name=self.name,
            governor=read_text(self._file("governor")),
            current_khz=read_int(current) // 1000 if current.exists() else None,
            min_khz=read_int(self._file("min_freq")) // 1000,
            max_khz=read_int(self._file("max_freq")) // 1000,
        )

    def pin(self, khz: int, journal: Journal) -> None:
        check_level(self, khz)
        pin_bounds(self._file("min_freq"), self._file("max_freq"), str(khz * 1000), journal)


Domain = CpufreqPolicy | DevfreqDevice


def check_level(domain: Domain, khz: int) -> None:
    levels = domain.frequencies()
    if khz not in levels:
        shown = ", ".join(f"{f // 1000} MHz" if f % 1000 == 0 else f"{f} kHz" for f in levels)
        raise DeviceError(f"{domain.name} has no {khz} kHz level (available: {shown})")


def change(target: Path, value: str, journal: Journal) -> None:
    """Journals ``target``'s value, then writes ``value`` (nothing when it holds it already)."""
    original = read_text(target)
    if original == value:
        return
    first = journal.record(target, original)
    try:
        write_text(target, value)
    except DeviceError:
        if first:
            journal.forget(target)
        raise


def pin_bounds(low: Path, high: Path, value: str, journal: Journal) -> None:
    """Sets both bounds to ``value`` in the order that keeps low <= high at every step."""
    first, second = (high, low) if int(value) >= int(read_text(low)) else (low, high)
    change(first, value, journal)
    change(second, value, journal)


def cpufreq_policies(root: Path = CPUFREQ_ROOT) -> list[CpufreqPolicy]:
    """Every cpufreq policy under ``root`` (cpuN/cpufreq, shared directories counted once)."""
    policies: dict[Path, list[int]] = {}
    for directory in sorted(root.glob("cpu[0-9]*/cpufreq")):
        cpu = int(directory.parent.name[3:])
        policies.setdefault(directory.resolve(), []).append(cpu)
    return [CpufreqPolicy(d, tuple(sorted(cpus))) for d, cpus in policies.items()]


def devfreq_devices(root: Path = DEVFREQ_ROOT) -> list[DevfreqDevice]:
    return [DevfreqDevice(d) for d in sorted(root.glob("*")) if (d / "available_frequencies").exists()]


def select_domains(
    cpus: list[int] | None,
    devfreq: list[str],
    *,
    cpufreq_root: Path = CPUFREQ_ROOT,
    devfreq_root: Path = DEVFREQ_ROOT,
) -> list[Domain]:
    """The cpufreq policies holding ``cpus`` (every policy with None) and the named devfreq
    devices; a DeviceError when one is missing or nothing is left to govern."""
    policies = cpufreq_policies(cpufreq_root)
    chosen: list[Domain] = []
    if cpus is None:
        chosen.extend(policies)
    else:
        for cpu in cpus:
            owners = [p for p in policies if cpu in p.cpus]
            if not owners:
                raise DeviceError(f"CPU {cpu} has no cpufreq policy under {cpufreq_root}")
            if owners[0] not in chosen:
                chosen.append(owners[0])
    devices = {d.name: d for d in devfreq_devices(devfreq_root)}
    for name in devfreq:
        if name not in devices:
            known = ", ".join(devices) or "none"
            raise DeviceError(f"no devfreq device {name!r} under {devfreq_root} (found: {known})")
        chosen.append(devices[name])
    if not chosen:
        raise DeviceError(
            f"no cpufreq policy under {cpufreq_root}: this kernel or VM does not let frequencies be set"
        )
    return chosen
