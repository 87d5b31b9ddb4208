"""Seed 001, Algorithm 4.1: search an energy-efficient combination of devices.

Reading of the seed (chapter 4.3.1), step by step:

1. every device runs one full inference alone: time t_i, energy e_i, average power p_i, EDP_i = e_i * t_i;
2. the fastest device is the reference: perf_i = t_min / t_i (the reference has 1), p_ri = p_i / p_ref;
3. repeat: a set of devices sharing the work in proportion to speed finishes in relative time
   t_r = 1 / sum(perf) (formula 4.1, serial time of the reference taken as 1) and draws relative power
   p_tr = sum(p_r); its relative EDP is edp_r = p_tr * t_r * t_r. If edp_r >= EDP_TH the device with the
   largest EDP_i is removed; until edp_r < EDP_TH.

So edp_r is the combination's EDP divided by the fastest device's EDP alone, and the default EDP_TH = 1
asks for a set that beats the fastest device on its own.

Ambiguities the seed leaves open, and what this module does:

- Termination. Taken literally the loop can empty the set: the reference alone has edp_r = 1, which is
  >= the default threshold 1. The last device is never removed; if one device is left and edp_r is still
  >= EDP_TH the search stops there and says the threshold was not met (``met_threshold`` False).
- No re-normalisation. The pseudocode normalises once (lines 7-12); after the reference is removed t_r and
  p_tr stay relative to the original fastest device. Kept as written: edp_r always compares with the
  fastest device alone.
- "Largest EDP" (line 18) is the device's own EDP_i from line 5, which orders devices exactly as
  p_ri / perf_ri^2. Ties drop the slower device, then the one later in the input order.
- The combination model is the seed's: times add as speeds (perfect overlap, no transfer cost) and powers
  add. Real runs add data movement and idle power; measure the chosen set to check the prediction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgecnn.hetero.profiles import (
    DeviceProfile,
    NormalisedProfile,
    ProfileError,
    normalise,
    reference_device,
)


@dataclass(frozen=True)
class CombinationMetrics:
    """A device set's predicted figures, relative (to the reference device alone) and absolute."""

    devices: tuple[str, ...]
    rel_time: float
    rel_power: float
    rel_edp: float
    seconds: float
    watts: float

    @property
    def joules(self) -> float:
        return self.watts * self.seconds

    @property
    def edp(self) -> float:
        return self.joules * self.seconds


@dataclass(frozen=True)
class SearchStep:
    """One pass of the repeat loop: the set examined, its relative figures and what was decided."""

    metrics: CombinationMetrics
    dropped: str | None
    text: str


@dataclass(frozen=True)
class SearchResult:
    """Algorithm 4.1's output: the chosen set S_HC and its relative performances Perf, with the reasoning."""

    chosen: tuple[str, ...]
    perf: dict[str, float]
    reference: str
    threshold: float
    met_threshold: bool
    normalised: tuple[NormalisedProfile, ...]
    steps: tuple[SearchStep, ...] = field(default=())

    @property
    def explanation(self) -> list[str]:
        """Human-readable lines: the normalisation, then one line per loop pass."""
        lines = [f"reference (fastest) device: {self.reference}"]
        for n in self.normalised:
            lines.append(
                f"{n.name}: {n.profile.seconds:.4g} s, {n.profile.power:.4g} W, EDP {n.profile.edp:.4g} J*s; "
                f"relative performance {n.perf:.3f}, relative power {n.power:.3f}, relative EDP alone {n.edp:.3f}"
            )
        lines.extend(step.text for step in self.steps)
        return lines

    @property
    def final(self) -> CombinationMetrics:
        """Predicted figures of the chosen set."""
        return self.steps[-1].metrics


def combination_metrics(
    normalised: list[NormalisedProfile] | tuple[NormalisedProfile, ...],
) -> CombinationMetrics:
    """Algorithm 4.1 lines 14-16 for one device set, plus the same figures in seconds and watts."""
    items = list(normalised)
    if not items:
        raise ProfileError("cannot evaluate an empty device combination")
    rel_time = 1.0 / sum(n.perf for n in items)
    rel_power = sum(n.power for n in items)
    # Any member converts back to absolute units: t_min = t_i * perf_i and p_ref = p_i / p_ri.
    first = items[0]
    t_min = first.profile.seconds * first.perf
    p_ref = first.profile.power / first.power
    return CombinationMetrics(
        devices=tuple(n.name for n in items),
        rel_time=rel_time,
        rel_power=rel_power,
        rel_edp=rel_power * rel_time * rel_time,
        seconds=t_min * rel_time,
        watts=p_ref * rel_power,
    )


def _check_threshold(threshold: float) -> float:
    value = float(threshold)
    if not value > 0.0 or value != value or value == float("inf"):
        raise ProfileError(f"EDP threshold must be a finite number > 0, got {threshold!r}")
    return value


def _fmt_set(names: tuple[str, ...]) -> str:
    return "{" + ", ".join(names) + "}"


def search_combination(
    profiles: list[DeviceProfile] | tuple[DeviceProfile, ...], edp_threshold: float = 1.0
) -> SearchResult:
    """Run Algorithm 4.1 on measured single-device profiles; see the module docstring for the reading."""
    threshold = _check_threshold(edp_threshold)
    normalised = normalise(profiles)
    reference = reference_device(list(profiles)).name
    order = {n.name: i for i, n in enumerate(normalised)}
    current = list(normalised)
    steps: list[SearchStep] = []
    met = False
    while True:
        metrics = combination_metrics(current)
        head = (
            f"{_fmt_set(metrics.devices)}: relative time {metrics.rel_time:.3f}, relative power "
            f"{metrics.rel_power:.3f}, relative EDP {metrics.rel_edp:.3f}"
        )
        if metrics.rel_edp < threshold:
            met = True
            steps.append(SearchStep(metrics, None, f"{head} < threshold {threshold:g}: keep this set"))
            break
        if len(current) == 1:
            steps.append(
                SearchStep(
                    metrics,
                    None,
                    f"{head} >= threshold {threshold:g}, but it is the last device: keep it "
                    "(threshold not met)",
                )
            )
            break
        worst = max(current, key=lambda n: (n.profile.edp, -n.perf, order[n.name]))
        steps.append(
            SearchStep(
                metrics,
                worst.name,
                f"{head} >= threshold {threshold:g}: drop {worst.name} (largest EDP alone: "
                f"{worst.profile.edp:.4g} J*s, {worst.edp:.3f}x the reference)",
            )
        )
        current = [n for n in current if n.name != worst.name]
    return SearchResult(
        chosen=tuple(n.name for n in current),
        perf={n.name: n.perf for n in current},
        reference=reference,
        threshold=threshold,
        met_threshold=met,
        normalised=tuple(normalised),
        steps=tuple(steps),
    )
