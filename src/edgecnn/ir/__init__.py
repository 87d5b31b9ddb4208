"""Graph intermediate representation: tensor types and specs, nodes, graphs."""

from edgecnn.ir.graph import Dim, Graph, Node, Shape, TensorSpec, TensorType

__all__ = ["Dim", "Graph", "Node", "Shape", "TensorSpec", "TensorType"]
