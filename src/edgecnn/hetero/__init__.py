"""Seed 001's heterogeneous planning: pick an energy-efficient device set (Algorithm 4.1) and split work (4.2).

Pure arithmetic on measured device profiles; profiling and concurrent execution live elsewhere.
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
