"""A partition: which devices share a model's layers, and how (Algorithm 4.2 shares, per-layer overrides).

The leading device is the one with the largest share (the fastest, in Algorithm 4.1's terms): layers that
cannot be split run there, unless the fine-grained planner placed them elsewhere. An override names the
devices that share one layer (in proportion to their shares); a single device runs the whole layer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from edgecnn.hetero.profiles import ProfileError
from edgecnn.hetero.split import split_counts, split_ratios


@dataclass(frozen=True)
class Partition:
    """``shares``: device -> relative performance or ratio (normalised here, order kept);
    ``layer_devices``: node name -> the device (or devices) that run that layer instead of all of them."""

    shares: Mapping[str, float]
    layer_devices: Mapping[str, str | tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ratios = split_ratios(self.shares)
        object.__setattr__(self, "shares", dict(zip(self.shares, ratios, strict=True)))
        placed: dict[str, tuple[str, ...]] = {}
        for layer, devices in self.layer_devices.items():
            names = (devices,) if isinstance(devices, str) else tuple(devices)
            unknown = [d for d in names if d not in self.shares]
            if not names or unknown or len(set(names)) != len(names):
                raise ProfileError(
                    f"layer {layer!r} is placed on {list(names)}, which is not a set of the partition's devices "
                    f"({', '.join(self.shares)})"
                )
            placed[layer] = tuple(d for d in self.shares if d in names)  # partition order
        object.__setattr__(self, "layer_devices", placed)

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(self.shares)

    @property
    def lead(self) -> str:
        """The device with the largest share; ties go to the earlier one."""
        return max(self.shares, key=lambda d: (self.shares[d], -self.devices.index(d)))

    def layer_set(self, layer: str) -> tuple[str, ...]:
        """The devices that share ``layer`` (all of them unless overridden)."""
        devices = self.layer_devices.get(layer)
        if devices is None:
            return self.devices
        return (devices,) if isinstance(devices, str) else devices  # __post_init__ made it a tuple

    def counts(self, layer: str, units: int) -> dict[str, int]:
        """Units of ``layer`` per device: Algorithm 4.2's proportional split among the layer's devices."""
        names = self.layer_set(layer)
        split = split_counts(units, [self.shares[d] for d in names])
        found = dict(zip(names, split, strict=True))
        return {d: found.get(d, 0) for d in self.shares}

    def whole_device(self, layer: str) -> str:
        """Where a layer that is not split runs: its override's fastest device, else the lead."""
        names = self.layer_devices.get(layer)
        if not names:
            return self.lead
        return max(names, key=lambda d: (self.shares[d], -self.devices.index(d)))

    def to_json(self) -> dict[str, object]:
        return {
            "shares": dict(self.shares),
            "layer_devices": {k: list(v) for k, v in self.layer_devices.items()},
        }

    @staticmethod
    def from_json(data: object) -> Partition:
        """Inverse of :meth:`to_json`; a ProfileError says what is wrong with damaged data."""
        if not isinstance(data, dict) or not isinstance(data.get("shares"), dict):
            raise ProfileError("a partition needs a 'shares' object")
        shares = data["shares"]
        layers = data.get("layer_devices", {})
        if not isinstance(layers, dict) or not all(
            isinstance(k, str) and isinstance(v, (str, list)) and all(isinstance(d, str) for d in v)
            for k, v in layers.items()
        ):
            raise ProfileError("'layer_devices' must map layer names to device names")
        layers = {k: (v if isinstance(v, str) else tuple(v)) for k, v in layers.items()}
        for name, value in shares.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise ProfileError(f"share of {name!r} must be a number, got {value!r}")
        return Partition({str(k): float(v) for k, v in shares.items()}, layers)
