"""Every ONNX backend test edgecnn does not run, with the reason, in one place.

Tests whose model uses an operator edgecnn does not implement are skipped automatically by the
harness (the skip message names the operators); this list holds everything else.
"""

SKIPS: dict[str, str] = {
    # element types edgecnn does not compute in (CNN inference is float32/float16/int8)
    r"bfloat16|BFLOAT16|_bf16": "bfloat16 tensors are not supported",
    r"float8|FLOAT8|e4m3|e5m2": "float8 tensors are not supported",
    r"float4|FLOAT4|int4|INT4|uint4|UINT4|int2|INT2|uint2|UINT2": "sub-byte tensors are not supported",
    r"_string": "string tensors are not supported",
    r"complex": "complex tensors are not supported",
    # features outside inference
    r"training_mode|test_training_dropout": "training-mode BatchNormalization/Dropout (edgecnn runs inference)",
    r"maxpool_with_argmax": "the Indices output of MaxPool is not supported",
    r"antialias": "Resize with antialias=1 is not supported",
    r"identity_opt|identity_sequence": "optional and sequence types are not supported",
}
