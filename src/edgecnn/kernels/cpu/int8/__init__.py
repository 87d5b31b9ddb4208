"""int8 kernels: ``steps`` (weights prepared per plan) over ``loops`` (compiled int8 GEMM and requantisation)."""
