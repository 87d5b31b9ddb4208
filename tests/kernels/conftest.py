"""The CPU kernel tests run in a process started as a plan would start it (TBB, bound workers)."""

from edgecnn.kernels.cpu import initialize_cpu_runtime

initialize_cpu_runtime()
