"""Backward passes per operator family; importing this package registers them all."""

from edgecnn.train.layers import activation, conv, dense, norm, pool, shape  # noqa: F401
