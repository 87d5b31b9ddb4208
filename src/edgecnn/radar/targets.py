"""The ten simulated target classes: aircraft-like geometries as sets of point scatterers.

A high-resolution range profile is dominated by a few strong scattering centres (the nose, the
cockpit, wing roots and tips, engine inlets, the fin and tail-plane tips, exhaust nozzles) and many
weak ones along the fuselage (joints, antennas, windows). Each class below places those centres from
a handful of dimensions. The numbers are generic shapes of their kind (a single-engine fighter is 15 m
long, a four-engine airliner 68 m) chosen to make ten distinct classes, not the data of any real type.

Body frame: x along the fuselage (nose at +length/2), y across (starboard positive), metres.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FUSELAGE_SPACING = 1.5
"""Metres between the weak fuselage scatterers."""


@dataclass(frozen=True)
class TargetClass:
    """One class's geometry; ``scatterers`` turns it into (x, y, amplitude) rows."""

    name: str
    length: float  # fuselage, nose to tail
    span: float  # wing tip to wing tip
    wing_at: float  # wing root's leading edge, as a fraction of the length from the nose
    sweep: float  # metres the tips sit behind the root
    wing_engines: tuple[float, ...] = ()  # |y| of engines under or on the wing (each a pair)
    rear_engines: float | None = None  # |y| of a pair of engines on the rear fuselage
    nozzles: int = 0  # exhaust nozzles in the tail (fighters)
    tail_span: float = 0.0  # horizontal tail-plane, tip to tip
    fins: int = 1  # vertical fins (twin-fin fighters have 2)

    def scatterers(self) -> np.ndarray:
        """(S, 3) float64 rows (x, y, amplitude), amplitudes relative to a unit nose return."""
        half = self.length / 2
        rows: list[tuple[float, float, float]] = [(half, 0.0, 1.0), (half - 0.12 * self.length, 0.0, 0.8)]
        for x in np.arange(half - FUSELAGE_SPACING, -half, -FUSELAGE_SPACING):
            rows.append((float(x), 0.0, 0.25))  # fuselage joints, antennas, windows
        root = half - self.wing_at * self.length
        radius = 0.05 * self.length  # fuselage radius, where the wing meets it
        for side in (-1.0, 1.0):
            rows.append((root, side * radius, 1.2))  # wing root: a corner reflector
            rows.append((root - self.sweep / 2, side * self.span / 4, 0.5))  # leading edge
            rows.append((root - self.sweep, side * self.span / 2, 0.8))  # wing tip
            for y in self.wing_engines:
                rows.append((root + 0.04 * self.length + y * self.sweep / self.span, side * y, 2.0))
            if self.rear_engines is not None:
                rows.append((-half + 0.25 * self.length, side * self.rear_engines, 2.0))
            if self.tail_span:
                rows.append((-half + 0.02 * self.length, side * self.tail_span / 2, 0.6))
        for fin in range(self.fins):
            offset = 0.0 if self.fins == 1 else (fin - (self.fins - 1) / 2) * 2 * radius
            rows.append((-half + 0.1 * self.length, offset, 1.0))
        for nozzle in range(self.nozzles):
            offset = (nozzle - (self.nozzles - 1) / 2) * 1.2
            rows.append((-half, offset, 1.5))  # engine exhaust cavity
        rows.append((-half, 0.0, 0.7))  # tail cone
        return np.asarray(rows, np.float64)


TARGET_CLASSES: tuple[TargetClass, ...] = (
    TargetClass("single-engine fighter", 15.0, 10.0, 0.45, 4.5, nozzles=1, tail_span=5.5),
    TargetClass("twin-engine fighter", 19.0, 13.0, 0.40, 5.0, nozzles=2, tail_span=8.5, fins=2),
    TargetClass("jet trainer", 11.5, 9.5, 0.45, 1.0, nozzles=1, tail_span=4.0),
    TargetClass("business jet", 20.0, 19.0, 0.45, 3.0, rear_engines=1.8, tail_span=7.0),
    TargetClass("regional turboprop", 27.0, 27.0, 0.40, 0.5, wing_engines=(4.1,), tail_span=9.0),
    TargetClass("narrow-body airliner", 38.0, 34.0, 0.38, 6.5, wing_engines=(5.8,), tail_span=12.5),
    TargetClass("wide-body twin airliner", 63.0, 60.0, 0.38, 11.0, wing_engines=(9.6,), tail_span=21.0),
    TargetClass("four-engine airliner", 68.0, 64.0, 0.37, 12.0, wing_engines=(12.0, 21.0), tail_span=22.0),
    TargetClass("four-turboprop transport", 30.0, 40.0, 0.38, 1.0, wing_engines=(6.0, 11.0), tail_span=16.0),
    TargetClass("swept-wing bomber", 48.0, 56.0, 0.33, 14.0, wing_engines=(8.0, 14.0), tail_span=14.0),
)
"""The example's ten classes, in label order."""
