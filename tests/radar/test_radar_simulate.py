"""The simulated radar returns: the echo model against its formula, profiles that put scatterers at
their ranges, aspect that foreshortens a target, and seeded, normalised, balanced data sets."""

from __future__ import annotations

import numpy as np
import pytest

from edgecnn.errors import InputError
from edgecnn.radar.simulate import LIGHT_SPEED, RadarSettings, echoes, range_profiles, simulate_returns
from edgecnn.radar.targets import TARGET_CLASSES

SETTINGS = RadarSettings()


def test_stepped_echoes_match_the_formula() -> None:
    rng = np.random.default_rng(0)
    ranges = rng.uniform(0, 112, (4, 30))
    amplitudes = rng.standard_normal((4, 30)) + 1j * rng.standard_normal((4, 30))
    f = SETTINGS.frequencies()
    direct = np.einsum("ns,nsk->nk", amplitudes, np.exp(-4j * np.pi * ranges[..., None] * f / LIGHT_SPEED))
    np.testing.assert_allclose(
        echoes(ranges, amplitudes, f), direct, rtol=0, atol=1e-8 * np.abs(direct).max()
    )


def peak_cells(ranges: list[float]) -> list[int]:
    """Cells of the profile's local maxima above half the highest, for unit scatterers at ``ranges``."""
    profile = range_profiles(echoes(np.array([ranges]), np.ones((1, len(ranges))), SETTINGS.frequencies()))[0]
    high = profile > profile.max() / 2
    return [
        i for i in range(1, len(profile) - 1) if high[i] and profile[i - 1] < profile[i] >= profile[i + 1]
    ]


def test_a_scatterer_appears_at_its_range_cell() -> None:
    cell = SETTINGS.cell_metres
    assert cell == pytest.approx(0.7495, abs=1e-4)
    assert peak_cells([40 * cell]) == [40]
    assert peak_cells([30 * cell, 90 * cell]) == [30, 90]  # two scatterers 60 cells apart


def test_aspect_foreshortens_the_target() -> None:
    """Nose and tail of a 30 m target at 0 and 60 degrees: 40 cells apart, then half that."""
    cell, length = SETTINGS.cell_metres, 40 * SETTINGS.cell_metres
    for degrees, apart in ((0.0, 40), (60.0, 20)):
        along = length / 2 * np.cos(np.deg2rad(degrees))
        first, second = peak_cells([75 * cell - along, 75 * cell + along])
        assert second - first == apart


def test_simulated_sets_are_seeded_normalised_and_balanced() -> None:
    data = simulate_returns(6, seed=3)
    assert data.images.shape == (60, 1, 150) and data.images.dtype == np.float32
    assert np.bincount(data.labels).tolist() == [6] * 10
    assert data.classes == tuple(c.name for c in TARGET_CLASSES)
    np.testing.assert_allclose(np.sqrt((data.images**2).mean(axis=2)), 1.0, rtol=1e-5)
    assert (data.images >= 0).all()
    again, other = simulate_returns(6, seed=3), simulate_returns(6, seed=4)
    np.testing.assert_array_equal(again.images, data.images)
    assert not np.array_equal(other.images, data.images)


def test_noise_and_clutter_change_returns_as_their_ratios_say() -> None:
    """At a 60 dB signal-to-noise ratio and no clutter, two returns of the same draw differ little;
    at 0 dB and with clutter at the signal's power, a lot."""

    def pair(settings: RadarSettings) -> float:
        a = simulate_returns(1, seed=5, settings=settings).images
        quiet = RadarSettings(snr_db=(200.0, 200.0), clutter_db=(-200.0, -200.0))
        b = simulate_returns(1, seed=5, settings=quiet).images
        return float(np.abs(a - b).mean())

    assert pair(RadarSettings(snr_db=(60.0, 60.0), clutter_db=(-200.0, -200.0))) < 0.01
    assert pair(RadarSettings(snr_db=(0.0, 0.0), clutter_db=(0.0, 0.0))) > 0.2


def test_at_least_one_return_per_class_and_sane_settings() -> None:
    with pytest.raises(InputError, match="per_class >= 1 and seed >= 0"):
        simulate_returns(0)
    with pytest.raises(InputError, match="seed >= 0"):
        simulate_returns(2, seed=-1)
    with pytest.raises(InputError, match=r"cells >= 2, bandwidth_hz > 0"):
        RadarSettings(cells=1, bandwidth_hz=0.0)
    with pytest.raises(InputError, match="snr_db low <= high"):
        RadarSettings(snr_db=(30.0, 10.0))


def test_every_class_is_distinct_and_fits_the_window() -> None:
    """No two classes share a geometry, and every target at the widest aspect, shifted furthest,
    stays inside the range window (the inverse FFT would wrap it around)."""
    window = SETTINGS.cells * SETTINGS.cell_metres
    shapes = set()
    for target in TARGET_CLASSES:
        body = target.scatterers()
        shapes.add(body.tobytes())
        theta = np.deg2rad(SETTINGS.aspect_deg)
        extent = np.ptp(body[:, 0]) * np.cos(theta) + np.ptp(body[:, 1]) * np.sin(theta)
        assert extent / 2 + SETTINGS.shift_cells * SETTINGS.cell_metres < window / 2, target.name
    assert len(shapes) == len(TARGET_CLASSES)
