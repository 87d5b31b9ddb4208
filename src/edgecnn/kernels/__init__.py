"""Kernels: how operators run. The registry picks the best kernel whose predicate accepts a node,
falling back to the op's numpy reference kernel."""

from edgecnn.kernels.registry import KernelChoice, register_kernel, select_kernel

__all__ = ["KernelChoice", "register_kernel", "select_kernel"]
