"""One converter per TFLite builtin operator family; importing this package registers them all."""

from edgecnn.importers.tflite.converters import arithmetic, shape, spatial
from edgecnn.importers.tflite.converters.common import CONVERTERS

__all__ = ["CONVERTERS", "arithmetic", "shape", "spatial"]
