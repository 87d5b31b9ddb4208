"""ONNX converters for norm operators (being written)."""
