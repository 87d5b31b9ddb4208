"""ONNX converters for dense operators (being written)."""
