"""TensorFlow Lite importer: ``.tflite`` FlatBuffers into edgecnn Graphs (NHWC mapped to NCHW once,
at import; int8 models through QDQ nodes)."""

from edgecnn.importers.tflite.loader import load_tflite

__all__ = ["load_tflite"]
