"""One device's full-inference measurement and its normalisation against the fastest device.

Seed 001, Algorithm 4.1 lines 2-12: every device runs one whole inference alone; the fastest one becomes the
reference, each device's performance is t_min / t_i and its power p_i / p_ref.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from edgecnn.errors import DeviceError

# Watts and joules given together must agree this closely (joules / seconds vs watts), relative.
_CONSISTENCY_RTOL = 0.02


class ProfileError(DeviceError, ValueError):
    """A device profile or planning input is missing, non-finite, non-positive or inconsistent."""


def _positive(value: float, what: str, name: str) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0.0:
        raise ProfileError(f"device {name!r}: {what} must be a finite number > 0, got {value!r}")
    return value


@dataclass(frozen=True)
class DeviceProfile:
    """Time and power (or energy) of one full inference on one device, measured alone.

    Give ``watts`` (average power), ``joules`` (energy of one inference) or both; both must then agree
    (joules ~= watts * seconds within 2 %), because the search uses power and the report uses energy.
    """

    name: str
    seconds: float
    watts: float | None = None
    joules: float | None = None
    estimated: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ProfileError(f"device profile needs a non-empty name, got {self.name!r}")
        seconds = _positive(self.seconds, "seconds", self.name)
        object.__setattr__(self, "seconds", seconds)
        if self.watts is None and self.joules is None:
            raise ProfileError(f"device {self.name!r}: give watts (average power) or joules (energy)")
        watts = None if self.watts is None else _positive(self.watts, "watts", self.name)
        joules = None if self.joules is None else _positive(self.joules, "joules", self.name)
        if watts is not None and joules is not None:
            implied = joules / seconds
            if abs(implied - watts) > _CONSISTENCY_RTOL * max(implied, watts):
                raise ProfileError(
                    f"device {self.name!r}: {joules} J over {seconds} s is {implied:.4g} W, "
                    f"but watts={watts} was given"
                )
        if watts is None:
            assert joules is not None  # one of the two was given (checked above)
            watts = joules / seconds
        if joules is None:
            joules = watts * seconds
        object.__setattr__(self, "watts", watts)
        object.__setattr__(self, "joules", joules)

    @property
    def power(self) -> float:
        """Average power in watts (always set after construction)."""
        assert self.watts is not None
        return self.watts

    @property
    def energy(self) -> float:
        """Energy of one inference in joules (always set after construction)."""
        assert self.joules is not None
        return self.joules

    @property
    def edp(self) -> float:
        """Energy-delay product E x T (seed 001, formula 2.1), in J*s."""
        return self.energy * self.seconds


@dataclass(frozen=True)
class NormalisedProfile:
    """A device relative to the reference (fastest) device: perf = t_min / t, power = p / p_ref."""

    profile: DeviceProfile
    perf: float
    power: float

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def edp(self) -> float:
        """This device's EDP alone relative to the reference device's: p_r / perf^2."""
        return self.power / (self.perf * self.perf)


def check_profiles(profiles: list[DeviceProfile] | tuple[DeviceProfile, ...]) -> list[DeviceProfile]:
    """Reject an empty list, non-profiles and duplicate names (the plan is keyed by device name)."""
    items = list(profiles)
    if not items:
        raise ProfileError("no device profiles given: at least one device is needed to plan")
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, DeviceProfile):
            raise ProfileError(f"expected DeviceProfile, got {type(item).__name__}")
        if item.name in seen:
            raise ProfileError(f"device {item.name!r} is profiled twice")
        seen.add(item.name)
    return items


def reference_device(profiles: list[DeviceProfile]) -> DeviceProfile:
    """The device with the smallest time (Algorithm 4.1 line 7); ties go to the lower power, then list order."""
    items = check_profiles(profiles)
    return min(items, key=lambda p: (p.seconds, p.power))


def normalise(profiles: list[DeviceProfile] | tuple[DeviceProfile, ...]) -> list[NormalisedProfile]:
    """Algorithm 4.1 lines 7-12: performance and power of every device relative to the fastest device."""
    items = check_profiles(profiles)
    ref = reference_device(items)
    return [NormalisedProfile(p, ref.seconds / p.seconds, p.power / ref.power) for p in items]
