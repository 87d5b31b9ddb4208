"""2-D convolution on the CPU: one module per algorithm, and ``steps`` registering the general ones."""
