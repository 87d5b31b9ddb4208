"""ONNX converters for pool operators (being written)."""
