"""Sparse-weight kernels for pruned layers: CSR weights (``csr``), compiled loops, the registered steps."""
