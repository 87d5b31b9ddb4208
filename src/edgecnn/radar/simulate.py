"""Simulated high-resolution range profiles (HRRPs): what a wideband radar sees of each target class.

The radar is a stepped-frequency radar: it transmits K = ``cells`` pulses at frequencies f_k = f_0 +
k * df and measures the complex echo of each. A point scatterer of amplitude a at range R returns
a * exp(-j 4 pi f_k R / c); the target's echo is the sum over its scatterers (docs/radar.md). An inverse
FFT over the K samples (Hamming-tapered) turns the echoes into a range profile of K cells of
c / (2 K df) metres each; its magnitude is the HRRP the classifier reads.

What varies from one return to the next:
- **aspect**: the target's heading relative to the line of sight, uniform within +-``aspect_deg`` of
  nose-on. A scatterer at (x, y) in the body frame lies at R0 - x cos(theta) - y sin(theta), so the
  profile stretches, shrinks and reorders with theta; scatterers sharing a cell interfere with the
  carrier's phase, which changes by a full turn over a few millimetres (aspect scintillation);
- **range alignment**: the target's centre is placed within +-``shift_cells`` of the window's centre;
- **scatterer fluctuation**: every scatterer's amplitude is scaled by a log-normal factor;
- **noise**: complex white Gaussian noise on every frequency sample, at a signal-to-noise ratio drawn
  from ``snr_db``;
- **clutter**: ``clutter_points`` scatterers at random ranges across the window with complex Gaussian
  amplitudes (Rayleigh-distributed cells, the textbook ground-clutter model), at a clutter-to-signal
  ratio drawn from ``clutter_db``.

Each profile is scaled to unit root-mean-square, the usual amplitude normalisation of HRRP
recognition (the target's distance and size in the beam should not decide its class).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgecnn.errors import InputError
from edgecnn.radar.targets import TARGET_CLASSES, TargetClass
from edgecnn.train.data.dataset import Dataset

LIGHT_SPEED = 299_792_458.0


@dataclass(frozen=True)
class RadarSettings:
    """The radar and the scene: waveform, the spread of each random effect."""

    cells: int = 150  # frequency steps = range cells = the network's input length (seed 003)
    carrier_hz: float = 10e9  # X band
    bandwidth_hz: float = 200e6  # 0.75 m range cells, a 112.5 m window
    aspect_deg: float = 25.0
    shift_cells: int = 8
    fluctuation: float = 0.3  # sigma of the log-normal amplitude factor
    snr_db: tuple[float, float] = (10.0, 30.0)
    clutter_db: tuple[float, float] = (-25.0, -10.0)
    clutter_points: int = 40

    def __post_init__(self) -> None:
        checks = {
            "cells >= 2": self.cells >= 2,
            "carrier_hz > 0": self.carrier_hz > 0,
            "bandwidth_hz > 0": self.bandwidth_hz > 0,
            "0 <= aspect_deg <= 90": 0 <= self.aspect_deg <= 90,
            "shift_cells >= 0": self.shift_cells >= 0,
            "fluctuation >= 0": self.fluctuation >= 0,
            "snr_db low <= high": self.snr_db[0] <= self.snr_db[1],
            "clutter_db low <= high": self.clutter_db[0] <= self.clutter_db[1],
            "clutter_points >= 0": self.clutter_points >= 0,
        }
        failed = [rule for rule, ok in checks.items() if not ok]
        if failed:
            raise InputError(f"radar settings {self}: need {', '.join(failed)}")

    @property
    def cell_metres(self) -> float:
        return LIGHT_SPEED / (2 * self.bandwidth_hz)

    def frequencies(self) -> np.ndarray:
        step = self.bandwidth_hz / self.cells
        return self.carrier_hz + step * np.arange(self.cells)


def echoes(ranges: np.ndarray, amplitudes: np.ndarray, frequencies: np.ndarray) -> np.ndarray:
    """(N, K) complex echoes of N returns, each a sum over its (N, S) scatterers' ranges and amplitudes.

    The frequencies are evenly stepped, so each scatterer's phasor at step k + 1 is the one at step k
    times a fixed rotation exp(-j 4 pi df R / c): K complex products per scatterer instead of K complex
    exponentials (after 150 rotations the rounding error is about 1e-9 of the echo, far below the
    float32 profile's resolution)."""
    step = frequencies[1] - frequencies[0] if len(frequencies) > 1 else 0.0
    phasor = amplitudes * np.exp((-4j * np.pi * frequencies[0] / LIGHT_SPEED) * ranges)
    rotation = np.exp((-4j * np.pi * step / LIGHT_SPEED) * ranges)
    result = np.empty((ranges.shape[0], len(frequencies)), np.complex128)
    for k in range(len(frequencies)):
        result[:, k] = phasor.sum(axis=1)
        phasor *= rotation
    return result


def range_profiles(samples: np.ndarray) -> np.ndarray:
    """(N, K) float32 HRRP magnitudes of (N, K) frequency samples: Hamming taper, inverse FFT, unit RMS."""
    profile = np.abs(np.fft.ifft(samples * np.hamming(samples.shape[1]), axis=1))
    rms = np.sqrt(np.mean(profile**2, axis=1, keepdims=True))
    return (profile / np.maximum(rms, np.finfo(np.float64).tiny)).astype(np.float32)


def simulate_class(
    target: TargetClass, count: int, rng: np.random.Generator, settings: RadarSettings
) -> np.ndarray:
    """(count, 1, cells) float32 profiles of one class."""
    body = target.scatterers()
    frequencies = settings.frequencies()
    window = settings.cells * settings.cell_metres
    theta = np.deg2rad(rng.uniform(-settings.aspect_deg, settings.aspect_deg, count))
    centre = window / 2 + settings.cell_metres * rng.uniform(
        -settings.shift_cells, settings.shift_cells, count
    )
    ranges = (
        centre[:, None]
        - body[None, :, 0] * np.cos(theta)[:, None]
        - body[None, :, 1] * np.sin(theta)[:, None]
    )
    amplitudes = body[None, :, 2] * rng.lognormal(0.0, settings.fluctuation, (count, len(body)))
    signal = echoes(ranges, amplitudes, frequencies)
    power = np.mean(np.abs(signal) ** 2, axis=1, keepdims=True)
    clutter_ranges = rng.uniform(0.0, window, (count, settings.clutter_points))
    clutter_gain = rng.standard_normal((count, settings.clutter_points, 2)) @ np.array([1.0, 1j])
    clutter = echoes(clutter_ranges, clutter_gain / np.sqrt(2 * settings.clutter_points), frequencies)
    clutter *= np.sqrt(power * _ratio(rng, settings.clutter_db, count))
    noise = (rng.standard_normal(signal.shape) + 1j * rng.standard_normal(signal.shape)) / np.sqrt(2)
    noise *= np.sqrt(power / _ratio(rng, settings.snr_db, count))
    return range_profiles(signal + clutter + noise)[:, None, :]


def _ratio(rng: np.random.Generator, db_range: tuple[float, float], count: int) -> np.ndarray:
    """(count, 1) power ratios drawn uniformly in decibels."""
    return 10.0 ** (rng.uniform(*db_range, (count, 1)) / 10.0)


def simulate_returns(
    per_class: int,
    seed: int = 0,
    settings: RadarSettings | None = None,
    classes: tuple[TargetClass, ...] = TARGET_CLASSES,
    name: str = "radar",
) -> Dataset:
    """``per_class`` labelled returns of every class, shuffled; the same seed gives the same set."""
    if per_class < 1 or seed < 0:
        raise InputError(f"simulated returns need per_class >= 1 and seed >= 0, got {per_class} and {seed}")
    settings = settings or RadarSettings()
    rng = np.random.default_rng(seed)
    profiles = np.concatenate([simulate_class(c, per_class, rng, settings) for c in classes])
    labels = np.repeat(np.arange(len(classes), dtype=np.int64), per_class)
    order = rng.permutation(len(labels))
    return Dataset(profiles[order], labels[order], tuple(c.name for c in classes), name)
