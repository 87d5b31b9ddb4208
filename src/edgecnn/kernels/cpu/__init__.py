"""Compiled CPU kernels (numba), registered for the "cpu" backend. Each is tested against the
op's numpy reference kernel."""
