"""ONNX converters for conv operators (being written)."""
