"""A partition: which devices share a model's layers, and how (Algorithm 4.2 shares, per-layer overrides).

The leading device is the one with the largest share (the fastest, in Algorithm 4.1's terms): layers that
cannot be split run there, unless the fine-grained planner placed them elsewhere.
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
    ``layer_devices``: node name -> the one device that runs that whole layer (overrides the split)."""

    shares: Mapping[str, float]
    layer_devices: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ratios = split_ratios(self.shares)
        object.__setattr__(self, "shares", dict(zip(self.shares, ratios, strict=True)))
        object.__setattr__(self, "layer_devices", dict(self.layer_devices))
        for layer, device in self.layer_devices.items():
            if device not in self.shares:
                raise ProfileError(
                    f"layer {layer!r} is placed on {device!r}, which is not in the partition's devices "
                    f"({', '.join(self.shares)})"
                )

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(self.shares)

    @property
    def lead(self) -> str:
        """The device with the largest share; ties go to the earlier one."""
        return max(self.shares, key=lambda d: (self.shares[d], -self.devices.index(d)))

    def counts(self, layer: str, units: int) -> dict[str, int]:
        """Units of ``layer`` per device: its override's device gets all, else the proportional split."""
        if layer in self.layer_devices:
            return {d: (units if d == self.layer_devices[layer] else 0) for d in self.shares}
        return dict(zip(self.shares, split_counts(units, list(self.shares.values())), strict=True))

    def whole_device(self, layer: str) -> str:
        """Where a layer that is not split runs."""
        return self.layer_devices.get(layer, self.lead)

    def to_json(self) -> dict[str, object]:
        return {"shares": dict(self.shares), "layer_devices": dict(self.layer_devices)}

    @staticmethod
    def from_json(data: object) -> Partition:
        """Inverse of :meth:`to_json`; a ProfileError says what is wrong with damaged data."""
        if not isinstance(data, dict) or not isinstance(data.get("shares"), dict):
            raise ProfileError("a partition needs a 'shares' object")
        shares = data["shares"]
        layers = data.get("layer_devices", {})
        if not isinstance(layers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in layers.items()
        ):
            raise ProfileError("'layer_devices' must map layer names to device names")
        for name, value in shares.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise ProfileError(f"share of {name!r} must be a number, got {value!r}")
        return Partition({str(k): float(v) for k, v in shares.items()}, layers)
