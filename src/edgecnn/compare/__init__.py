"""Layer-by-layer comparison of edgecnn with another engine (`edgecnn compare`): which layer
diverges first when an imported model disagrees with the framework it came from."""

from edgecnn.compare.layers import Comparison, LayerComparison, compare_layers
from edgecnn.compare.metrics import TensorDiff, Tolerance
from edgecnn.compare.peer import PEERS

__all__ = ["PEERS", "Comparison", "LayerComparison", "TensorDiff", "Tolerance", "compare_layers"]
