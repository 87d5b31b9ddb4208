"""The GPU backends' activation table: every fused activation edgecnn.ops defines has a code ("none"
is 0) and a formula in the device source of ``activate``."""

from __future__ import annotations

import numpy as np

from edgecnn.kernels.gpu.activations import (
    ACTIVATION_CODES,
    ACTIVATION_OPS,
    FORMULAS,
    NO_ACTIVATION,
    activate_source,
    activation_params,
)
from edgecnn.ops.fused import ACTIVATIONS, FusedActivation


def test_every_fused_activation_has_a_formula() -> None:
    assert list(ACTIVATION_CODES.values()) == list(range(len(ACTIVATION_CODES)))
    assert ACTIVATION_CODES["none"] == 0 and set(ACTIVATION_CODES) - {"none"} == set(FORMULAS)
    assert set(ACTIVATIONS) <= set(ACTIVATION_CODES)
    assert set(ACTIVATION_OPS.values()) <= set(ACTIVATION_CODES)


def test_the_device_source_has_one_case_per_code() -> None:
    source = activate_source("__device__")
    assert "__device__ float activate(" in source
    for name, code in ACTIVATION_CODES.items():
        assert f"#define ACT_{name.upper()} {code}\n" in source
        assert (f"case ACT_{name.upper()}:" in source) == (name != "none")


def test_launch_arguments_of_a_fused_activation() -> None:
    code, slope, low, high = activation_params(FusedActivation("clip", low=0.0, high=6.0))
    assert (code, low, high) == (ACTIVATION_CODES["clip"], np.float32(0), np.float32(6))
    assert isinstance(slope, np.float32)
    assert activation_params(FusedActivation())[::2] == NO_ACTIVATION[::2]  # code 0, no lower bound


def test_hard_sigmoid_launches_its_scale_and_offset() -> None:
    """HardSigmoid's (scale, offset) go in the slope and low slots its formula reads."""
    code, scale, offset, _ = activation_params(FusedActivation("hard_sigmoid", scale=0.2, offset=0.5))
    assert (code, scale, offset) == (ACTIVATION_CODES["hard_sigmoid"], np.float32(0.2), np.float32(0.5))
