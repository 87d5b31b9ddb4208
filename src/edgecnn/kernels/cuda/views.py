"""Shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity), Concat, Split and Transpose on
CUDA, so that a chain of CUDA steps keeps its data on the GPU across them (plans and the view step in
kernels.gpu.views). The copies are one kernel launch per input or output: CuPy's concatenate and
transpose cost several host calls each."""

from __future__ import annotations

from edgecnn.ir.graph import Node
from edgecnn.kernels.cuda.array import CudaArray
from edgecnn.kernels.cuda.step import CudaStep, cuda_kernel, device_for_plan
from edgecnn.kernels.gpu.step import Types, Values
from edgecnn.kernels.gpu.views import (
    VIEW_OPS,
    ViewStep,
    concat_plan,
    concat_supported,
    split_plan,
    split_supported,
    transpose_plan,
    transpose_supported,
    view_shape,
    view_supported,
)


def cuda_view(node: Node, types: Types, values: Values) -> ViewStep:
    return ViewStep(device_for_plan(), CudaArray, view_shape(node, types, values))


for _op in VIEW_OPS:
    cuda_kernel(_op, when=view_supported, name=f"cuda_{_op.lower()}_view")(cuda_view)


@cuda_kernel("Concat", when=concat_supported, name="cuda_concat")
def cuda_concat(node: Node, types: Types, values: Values) -> CudaStep:
    """Each input is copied as rows into the output's wider rows."""
    device = device_for_plan()
    out_shape, out_row, pieces = concat_plan(node, types, values)

    def launch(*xs: CudaArray) -> CudaArray:
        y = CudaArray.empty(device, out_shape)
        for x, piece in zip(xs, pieces):
            device.launch("copy_rows", piece.total, x.array, y.array, piece.row, out_row, piece.start)
        return y

    return CudaStep(device, launch, range(len(pieces)))


@cuda_kernel("Split", when=split_supported, name="cuda_split")
def cuda_split(node: Node, types: Types, values: Values) -> CudaStep:
    """Each output takes its rows out of the input's wider rows."""
    device = device_for_plan()
    in_row, outputs = split_plan(node, types, values)

    def launch(x: CudaArray, sizes: object = None) -> tuple[CudaArray, ...]:
        pieces = []
        for out in outputs:
            y = CudaArray.empty(device, out.shape)
            device.launch("copy_rows_from", out.total, x.array, y.array, in_row, out.row, out.start)
            pieces.append(y)
        return tuple(pieces)

    return CudaStep(device, launch, (0,))


@cuda_kernel("Transpose", when=transpose_supported, name="cuda_transpose")
def cuda_transpose(node: Node, types: Types, values: Values) -> CudaStep:
    device = device_for_plan()
    out_shape, meta, rank = transpose_plan(node, types)
    with device.cuda:
        meta_device = device.cupy.asarray(meta)  # uploaded once per plan

    def launch(x: CudaArray) -> CudaArray:
        y = CudaArray.empty(device, out_shape)
        device.launch("permute", y.size, x.array, y.array, meta_device, rank)
        return y

    return CudaStep(device, launch, (0,))
