"""Backward passes per operator family; importing this package registers them all."""

from edgecnn.kernels.cpu.system import kernel_cache

kernel_cache.install()  # before the layers' compiled kernels are decorated

from edgecnn.train.layers import activation, conv, dense, norm, pool, shape  # noqa: E402, F401
