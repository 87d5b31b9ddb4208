"""ONNX importer: reads ModelProto files (with external data) into edgecnn Graphs."""

from edgecnn.importers.onnx.reader import load_onnx

__all__ = ["load_onnx"]
