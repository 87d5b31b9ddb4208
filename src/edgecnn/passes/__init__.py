"""Graph optimisation passes: small pure functions Graph -> Graph, run in one ordered pipeline."""

from edgecnn.passes.pipeline import PIPELINE, PassReport, optimize

__all__ = ["PIPELINE", "PassReport", "optimize"]
