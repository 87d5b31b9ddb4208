"""ONNX converters for elementwise operators (being written)."""
