"""Per-layer timing through executor hooks."""

from edgecnn.profiling.layer_timer import LayerTimer, LayerTiming, Profile

__all__ = ["LayerTimer", "LayerTiming", "Profile"]
