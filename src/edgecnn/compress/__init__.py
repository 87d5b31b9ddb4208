"""Model compression that ends in smaller .ecnn files: magnitude pruning (one-shot, iterative with
retraining, or whole filters), float16/int8 weight storage, CSR for sparse weights (docs/compression.md).

    graph, plan = compress(graph, prune=0.15, quantize="int8")
    save_ecnn(graph, "small.ecnn", storage=plan)
"""

from edgecnn.compress.layers import WeightLayer, density, weight_layers
from edgecnn.compress.pipeline import compress
from edgecnn.compress.prune import magnitude_mask, prune
from edgecnn.compress.quantize import quantize
from edgecnn.compress.retrain import RetrainStage, prune_retrain, retention_schedule
from edgecnn.compress.sensitivity import DEFAULT_KEEPS, SensitivityPoint, agreement_score, sensitivity
from edgecnn.compress.structured import prune_structured

__all__ = [
    "DEFAULT_KEEPS",
    "RetrainStage",
    "SensitivityPoint",
    "WeightLayer",
    "agreement_score",
    "compress",
    "density",
    "magnitude_mask",
    "prune",
    "prune_retrain",
    "prune_structured",
    "quantize",
    "retention_schedule",
    "sensitivity",
    "weight_layers",
]
