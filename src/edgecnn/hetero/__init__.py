"""Seed 001's heterogeneous planning: pick an energy-efficient device set (Algorithm 4.1) and split work (4.2).

This package's root holds the pure arithmetic on measured device profiles. Around it: ``partition`` and
``slicing`` (which device computes which output channels), ``execute`` (one worker thread per device running
its slices), ``transfer`` and ``finegrained`` (copy costs, per-layer device choice), ``store`` (saved plans),
``measure`` and ``planner`` (what `edgecnn plan` runs), ``report`` (the docs' tables).
"""

from edgecnn.hetero.profiles import DeviceProfile, NormalisedProfile, ProfileError, normalise
from edgecnn.hetero.search import SearchResult, combination_metrics, search_combination
from edgecnn.hetero.split import LayerSplit, split_counts, split_layers, split_ratios

__all__ = [
    "DeviceProfile",
    "LayerSplit",
    "NormalisedProfile",
    "ProfileError",
    "SearchResult",
    "combination_metrics",
    "normalise",
    "search_combination",
    "split_counts",
    "split_layers",
    "split_ratios",
]
