"""Process-level support every compiled CPU kernel shares: the thread pool and its binding to cores, BLAS
called from compiled code, per-thread scratch, and numba start-up."""
