"""ONNX converters for shape operators (being written)."""
