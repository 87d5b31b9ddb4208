"""ONNX converters for reduce operators (being written)."""
