"""The part of Caffe's protobuf schema that inference needs, declared here and compiled at import
into message classes with protobuf's descriptor pool.

Field names, numbers, types and defaults follow Caffe's published `caffe.proto` (they are the
file format). Fields this subset leaves out are skipped when a `.caffemodel` is decoded; in a
prototxt they are reported (see reader.py). Declaring messages in Python keeps the schema next to
the code that reads it and needs no protoc at build time.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

FieldSpec = tuple[str, int, str, str] | tuple[str, int, str, str, str]
"""(name, number, label: "optional"|"repeated", type, [default as proto text])."""

ENGINE = {"DEFAULT": 0, "CAFFE": 1, "CUDNN": 2}

MESSAGES: dict[str, tuple[list[FieldSpec], dict[str, dict[str, int]]]] = {
    "BlobShape": ([("dim", 1, "repeated", "int64")], {}),
    "BlobProto": (
        [
            ("shape", 7, "optional", "BlobShape"),
            ("data", 5, "repeated", "float"),
            ("double_data", 8, "repeated", "double"),
            ("num", 1, "optional", "int32", "0"),
            ("channels", 2, "optional", "int32", "0"),
            ("height", 3, "optional", "int32", "0"),
            ("width", 4, "optional", "int32", "0"),
        ],
        {},
    ),
    "FillerParameter": (
        [
            ("type", 1, "optional", "string", "constant"),
            ("value", 2, "optional", "float", "0"),
            ("min", 3, "optional", "float", "0"),
            ("max", 4, "optional", "float", "1"),
            ("mean", 5, "optional", "float", "0"),
            ("std", 6, "optional", "float", "1"),
            ("sparse", 7, "optional", "int32", "-1"),
            ("variance_norm", 8, "optional", "FillerParameter.VarianceNorm", "FAN_IN"),
        ],
        {"VarianceNorm": {"FAN_IN": 0, "FAN_OUT": 1, "AVERAGE": 2}},
    ),
    "NetStateRule": (
        [
            ("phase", 1, "optional", "Phase"),
            ("min_level", 2, "optional", "int32"),
            ("max_level", 3, "optional", "int32"),
            ("stage", 4, "repeated", "string"),
            ("not_stage", 5, "repeated", "string"),
        ],
        {},
    ),
    "ParamSpec": (
        [
            ("name", 1, "optional", "string"),
            ("lr_mult", 3, "optional", "float", "1"),
            ("decay_mult", 4, "optional", "float", "1"),
        ],
        {},
    ),
    "NetParameter": (
        [
            ("name", 1, "optional", "string"),
            ("input", 3, "repeated", "string"),
            ("input_shape", 8, "repeated", "BlobShape"),
            ("input_dim", 4, "repeated", "int32"),
            ("force_backward", 5, "optional", "bool", "false"),
            ("layer", 100, "repeated", "LayerParameter"),
            ("layers", 2, "repeated", "V1LayerParameter"),
        ],
        {},
    ),
    "ConvolutionParameter": (
        [
            ("num_output", 1, "optional", "uint32"),
            ("bias_term", 2, "optional", "bool", "true"),
            ("pad", 3, "repeated", "uint32"),
            ("kernel_size", 4, "repeated", "uint32"),
            ("stride", 6, "repeated", "uint32"),
            ("dilation", 18, "repeated", "uint32"),
            ("pad_h", 9, "optional", "uint32", "0"),
            ("pad_w", 10, "optional", "uint32", "0"),
            ("kernel_h", 11, "optional", "uint32"),
            ("kernel_w", 12, "optional", "uint32"),
            ("stride_h", 13, "optional", "uint32"),
            ("stride_w", 14, "optional", "uint32"),
            ("group", 5, "optional", "uint32", "1"),
            ("weight_filler", 7, "optional", "FillerParameter"),
            ("bias_filler", 8, "optional", "FillerParameter"),
            ("engine", 15, "optional", "ConvolutionParameter.Engine", "DEFAULT"),
            ("axis", 16, "optional", "int32", "1"),
            ("force_nd_im2col", 17, "optional", "bool", "false"),
        ],
        {"Engine": ENGINE},
    ),
    "PoolingParameter": (
        [
            ("pool", 1, "optional", "PoolingParameter.PoolMethod", "MAX"),
            ("pad", 4, "optional", "uint32", "0"),
            ("pad_h", 9, "optional", "uint32", "0"),
            ("pad_w", 10, "optional", "uint32", "0"),
            ("kernel_size", 2, "optional", "uint32"),
            ("kernel_h", 5, "optional", "uint32"),
            ("kernel_w", 6, "optional", "uint32"),
            ("stride", 3, "optional", "uint32", "1"),
            ("stride_h", 7, "optional", "uint32"),
            ("stride_w", 8, "optional", "uint32"),
            ("engine", 11, "optional", "PoolingParameter.Engine", "DEFAULT"),
            ("global_pooling", 12, "optional", "bool", "false"),
            ("round_mode", 13, "optional", "PoolingParameter.RoundMode", "CEIL"),
        ],
        {
            "PoolMethod": {"MAX": 0, "AVE": 1, "STOCHASTIC": 2},
            "Engine": ENGINE,
            "RoundMode": {"CEIL": 0, "FLOOR": 1},
        },
    ),
    "InnerProductParameter": (
        [
            ("num_output", 1, "optional", "uint32"),
            ("bias_term", 2, "optional", "bool", "true"),
            ("weight_filler", 3, "optional", "FillerParameter"),
            ("bias_filler", 4, "optional", "FillerParameter"),
            ("axis", 5, "optional", "int32", "1"),
            ("transpose", 6, "optional", "bool", "false"),
        ],
        {},
    ),
    "ReLUParameter": (
        [
            ("negative_slope", 1, "optional", "float", "0"),
            ("engine", 2, "optional", "ReLUParameter.Engine", "DEFAULT"),
        ],
        {"Engine": ENGINE},
    ),
    "PReLUParameter": (
        [("filler", 1, "optional", "FillerParameter"), ("channel_shared", 2, "optional", "bool", "false")],
        {},
    ),
    "ELUParameter": ([("alpha", 1, "optional", "float", "1")], {}),
    "PowerParameter": (
        [
            ("power", 1, "optional", "float", "1"),
            ("scale", 2, "optional", "float", "1"),
            ("shift", 3, "optional", "float", "0"),
        ],
        {},
    ),
    "LRNParameter": (
        [
            ("local_size", 1, "optional", "uint32", "5"),
            ("alpha", 2, "optional", "float", "1"),
            ("beta", 3, "optional", "float", "0.75"),
            ("norm_region", 4, "optional", "LRNParameter.NormRegion", "ACROSS_CHANNELS"),
            ("k", 5, "optional", "float", "1"),
            ("engine", 6, "optional", "LRNParameter.Engine", "DEFAULT"),
        ],
        {"NormRegion": {"ACROSS_CHANNELS": 0, "WITHIN_CHANNEL": 1}, "Engine": ENGINE},
    ),
    "SoftmaxParameter": (
        [
            ("engine", 1, "optional", "SoftmaxParameter.Engine", "DEFAULT"),
            ("axis", 2, "optional", "int32", "1"),
        ],
        {"Engine": ENGINE},
    ),
    "SigmoidParameter": (
        [("engine", 1, "optional", "SigmoidParameter.Engine", "DEFAULT")],
        {"Engine": ENGINE},
    ),
    "TanHParameter": ([("engine", 1, "optional", "TanHParameter.Engine", "DEFAULT")], {"Engine": ENGINE}),
    "DropoutParameter": ([("dropout_ratio", 1, "optional", "float", "0.5")], {}),
    "ConcatParameter": (
        [("axis", 2, "optional", "int32", "1"), ("concat_dim", 1, "optional", "uint32", "1")],
        {},
    ),
    "SliceParameter": (
        [
            ("axis", 3, "optional", "int32", "1"),
            ("slice_point", 2, "repeated", "uint32"),
            ("slice_dim", 1, "optional", "uint32", "1"),
        ],
        {},
    ),
    "EltwiseParameter": (
        [
            ("operation", 1, "optional", "EltwiseParameter.EltwiseOp", "SUM"),
            ("coeff", 2, "repeated", "float"),
            ("stable_prod_grad", 3, "optional", "bool", "true"),
        ],
        {"EltwiseOp": {"PROD": 0, "SUM": 1, "MAX": 2}},
    ),
    "BatchNormParameter": (
        [
            ("use_global_stats", 1, "optional", "bool"),
            ("moving_average_fraction", 2, "optional", "float", "0.999"),
            ("eps", 3, "optional", "float", "1e-5"),
        ],
        {},
    ),
    "ScaleParameter": (
        [
            ("axis", 1, "optional", "int32", "1"),
            ("num_axes", 2, "optional", "int32", "1"),
            ("filler", 3, "optional", "FillerParameter"),
            ("bias_term", 4, "optional", "bool", "false"),
            ("bias_filler", 5, "optional", "FillerParameter"),
        ],
        {},
    ),
    "FlattenParameter": (
        [("axis", 1, "optional", "int32", "1"), ("end_axis", 2, "optional", "int32", "-1")],
        {},
    ),
    "ReshapeParameter": (
        [
            ("shape", 1, "optional", "BlobShape"),
            ("axis", 2, "optional", "int32", "0"),
            ("num_axes", 3, "optional", "int32", "-1"),
        ],
        {},
    ),
    "InputParameter": ([("shape", 1, "repeated", "BlobShape")], {}),
}

LAYER_PARAMS: dict[str, tuple[int, str]] = {
    "batch_norm_param": (139, "BatchNormParameter"),
    "concat_param": (104, "ConcatParameter"),
    "convolution_param": (106, "ConvolutionParameter"),
    "dropout_param": (108, "DropoutParameter"),
    "eltwise_param": (110, "EltwiseParameter"),
    "elu_param": (140, "ELUParameter"),
    "flatten_param": (135, "FlattenParameter"),
    "inner_product_param": (117, "InnerProductParameter"),
    "input_param": (143, "InputParameter"),
    "lrn_param": (118, "LRNParameter"),
    "pooling_param": (121, "PoolingParameter"),
    "power_param": (122, "PowerParameter"),
    "prelu_param": (131, "PReLUParameter"),
    "relu_param": (123, "ReLUParameter"),
    "reshape_param": (133, "ReshapeParameter"),
    "scale_param": (142, "ScaleParameter"),
    "sigmoid_param": (124, "SigmoidParameter"),
    "softmax_param": (125, "SoftmaxParameter"),
    "slice_param": (126, "SliceParameter"),
    "tanh_param": (127, "TanHParameter"),
}
"""LayerParameter's ``*_param`` fields: name -> (field number, message)."""

V1_LAYER_PARAMS: dict[str, int] = {
    "concat_param": 9,
    "convolution_param": 10,
    "dropout_param": 12,
    "eltwise_param": 24,
    "inner_product_param": 17,
    "lrn_param": 18,
    "pooling_param": 19,
    "power_param": 21,
    "relu_param": 30,
    "sigmoid_param": 38,
    "softmax_param": 39,
    "slice_param": 31,
    "tanh_param": 37,
}
"""The legacy V1LayerParameter's ``*_param`` fields (same messages, other numbers)."""

V1_LAYER_TYPES: dict[str, int] = {
    "NONE": 0, "ABSVAL": 35, "ACCURACY": 1, "ARGMAX": 30, "BNLL": 2, "CONCAT": 3, "CONTRASTIVE_LOSS": 37,
    "CONVOLUTION": 4, "DATA": 5, "DECONVOLUTION": 39, "DROPOUT": 6, "DUMMY_DATA": 32, "EUCLIDEAN_LOSS": 7,
    "ELTWISE": 25, "EXP": 38, "FLATTEN": 8, "HDF5_DATA": 9, "HDF5_OUTPUT": 10, "HINGE_LOSS": 28,
    "IM2COL": 11, "IMAGE_DATA": 12, "INFOGAIN_LOSS": 13, "INNER_PRODUCT": 14, "LRN": 15, "MEMORY_DATA": 29,
    "MULTINOMIAL_LOGISTIC_LOSS": 16, "MVN": 34, "POOLING": 17, "POWER": 26, "RELU": 18, "SIGMOID": 19,
    "SIGMOID_CROSS_ENTROPY_LOSS": 27, "SILENCE": 36, "SOFTMAX": 20, "SOFTMAX_LOSS": 21, "SPLIT": 22,
    "SLICE": 33, "TANH": 23, "WINDOW_DATA": 24, "THRESHOLD": 31,
}  # fmt: skip

MESSAGES["LayerParameter"] = (
    [
        ("name", 1, "optional", "string"),
        ("type", 2, "optional", "string"),
        ("bottom", 3, "repeated", "string"),
        ("top", 4, "repeated", "string"),
        ("phase", 10, "optional", "Phase"),
        ("loss_weight", 5, "repeated", "float"),
        ("param", 6, "repeated", "ParamSpec"),
        ("blobs", 7, "repeated", "BlobProto"),
        ("propagate_down", 11, "repeated", "bool"),
        ("include", 8, "repeated", "NetStateRule"),
        ("exclude", 9, "repeated", "NetStateRule"),
        *((name, number, "optional", message) for name, (number, message) in LAYER_PARAMS.items()),
    ],
    {},
)
MESSAGES["V1LayerParameter"] = (
    [
        ("bottom", 2, "repeated", "string"),
        ("top", 3, "repeated", "string"),
        ("name", 4, "optional", "string"),
        ("include", 32, "repeated", "NetStateRule"),
        ("exclude", 33, "repeated", "NetStateRule"),
        ("type", 5, "optional", "V1LayerParameter.LayerType"),
        ("blobs", 6, "repeated", "BlobProto"),
        ("param", 1001, "repeated", "string"),
        ("blobs_lr", 7, "repeated", "float"),
        ("weight_decay", 8, "repeated", "float"),
        ("loss_weight", 35, "repeated", "float"),
        *((name, number, "optional", LAYER_PARAMS[name][1]) for name, number in V1_LAYER_PARAMS.items()),
    ],
    {"LayerType": V1_LAYER_TYPES},
)

TOP_LEVEL_ENUMS = {"Phase": {"TRAIN": 0, "TEST": 1}}
PACKAGE = "edgecnn_caffe"

_SCALARS = {
    "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
    "float": descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "uint32": descriptor_pb2.FieldDescriptorProto.TYPE_UINT32,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
}
_PACKED = {"dim", "data", "double_data"}
"""Repeated numeric fields Caffe declares [packed = true]."""


def _enum(proto: Any, name: str, values: dict[str, int]) -> None:
    enum = proto.add(name=name)
    for value_name, number in values.items():
        enum.value.add(name=value_name, number=number)


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="edgecnn_caffe.proto", package=PACKAGE, syntax="proto2")
    for name, values in TOP_LEVEL_ENUMS.items():
        _enum(file.enum_type, name, values)
    enum_names = set(TOP_LEVEL_ENUMS) | {
        f"{message}.{enum}" for message, (_, enums) in MESSAGES.items() for enum in enums
    }
    for message_name, (fields, enums) in MESSAGES.items():
        message = file.message_type.add(name=message_name)
        for enum_name, values in enums.items():
            _enum(message.enum_type, enum_name, values)
        for name, number, label, type_name, *default in fields:
            field = message.field.add(name=name, number=number, json_name=name)
            field.label = (
                descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
                if label == "repeated"
                else descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
            )
            if type_name in _SCALARS:
                field.type = _SCALARS[type_name]
                if label == "repeated" and name in _PACKED:
                    field.options.packed = True
            elif type_name in enum_names:
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_ENUM
                field.type_name = f".{PACKAGE}.{type_name}"
            else:
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
                field.type_name = f".{PACKAGE}.{type_name}"
            if default:
                field.default_value = default[0]
    return file


def _compile() -> dict[str, Any]:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
        for name in MESSAGES
    }


_CLASSES = _compile()
NetParameter = _CLASSES["NetParameter"]
BlobProto = _CLASSES["BlobProto"]
LayerParameter = _CLASSES["LayerParameter"]
