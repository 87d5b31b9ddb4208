"""ONNX converters for resize operators (being written)."""
