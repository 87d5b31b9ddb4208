"""Algorithm 5.1's classification: the last M load samples against the template by DTW, below
DTW_TH meaning the CNN scene. Samples are placed by their timestamps and the window resampled
onto the regular grid before the distance, so that a sample that comes early or late, or not at
all, shifts nothing; a window with too little left in it keeps the previous verdict. Seed 001
recomputed the distance once per M samples; this recomputes it every ``stride`` samples (default
every sample, which the measured cost allows), so that a change of scene is seen within M samples.
A window that straddles the change can sit near the threshold for a few samples; ``hysteresis``
(DTW units) keeps the CNN verdict until the distance passes threshold + hysteresis, so that the
governor does not itself ping-pong there."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from edgecnn.dvfs.dtw import default_psi, dtw_distance
from edgecnn.dvfs.traces import regular
from edgecnn.errors import ConfigurationError

MIN_WINDOW = 21  # seed 001: M > 20 covers the app's load pattern


@dataclass(frozen=True)
class Decision:
    seconds: float
    load: float
    distance: float  # inf until the first full window
    cnn: bool


class SceneClassifier:
    """``push(seconds, load)`` per sample; returns the current Decision."""

    def __init__(
        self,
        template: np.ndarray | tuple[float, ...],
        threshold: float,
        *,
        window: int,
        period: float,
        stride: int = 1,
        psi: int | None = None,
        hysteresis: float = 0.0,
    ) -> None:
        if window < MIN_WINDOW:
            raise ConfigurationError(f"the window M must be more than 20 samples (got {window})")
        if period <= 0 or stride < 1 or threshold <= 0 or hysteresis < 0 or len(template) < 2:
            raise ConfigurationError(
                "period and threshold must be positive, hysteresis 0+, stride 1+, template 2+ samples"
            )
        self.template = np.asarray(template, dtype=np.float64)
        self.threshold = threshold
        self.window = window
        self.period = period
        self.stride = stride
        self.psi = default_psi(len(self.template)) if psi is None else psi
        self.hysteresis = hysteresis
        self.distance = math.inf  # Algorithm 5.1 starts above the threshold: the default governor
        self.cnn = False
        self._times: deque[float] = deque(maxlen=2 * window)
        self._loads: deque[float] = deque(maxlen=2 * window)
        self._since = 0

    def push(self, seconds: float, load: float) -> Decision:
        if self._times and seconds <= self._times[-1]:
            return Decision(seconds, load, self.distance, self.cnn)
        self._times.append(seconds)
        self._loads.append(load)
        self._since += 1
        if self._since >= self.stride:
            self._since = 0
            times = np.fromiter(self._times, dtype=np.float64)
            loads = np.fromiter(self._loads, dtype=np.float64)
            horizon = times >= seconds - (self.window + 4) * self.period
            grid = regular(times[horizon], loads[horizon], self.period, self.window)
            if grid is not None:
                self.distance = dtw_distance(grid, self.template, self.psi)
                self.cnn = self.distance < self.threshold + (self.hysteresis if self.cnn else 0.0)
        return Decision(seconds, load, self.distance, self.cnn)
