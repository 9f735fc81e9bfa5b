"""Determinants, quantised matrix products and bit casts with paddle kernels."""

from __future__ import annotations

from typing import Any

import paddle
from onnx import TensorProto

from anpred.translate.paddle.dtypes import float_dtype, paddle_dtype
from anpred.translate.registry import NodeCall, register

Tensor = Any

#: Four-byte paddle dtypes a BitCast may produce.
_FOUR_BYTES = ("float32", "int32")
#: Saturation bounds of QLinearMatMul's output types.
_INT_RANGE = {paddle.int8: (-128, 127), paddle.uint8: (0, 255)}


@register("paddle", "Det")
def det(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Det of (batches of) square matrices: ``paddle.linalg.det``."""
    return paddle.linalg.det(x)


@register("paddle", "BitCast")
def bit_cast(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX BitCast: the same bits as another type of the same width (``paddle.view``).

    Bits are a property of the ONNX type: in a float64 run a float input is taken back to
    the float32 it stands for first, and a float result is widened after.
    """
    to = int(call.attr("to"))
    target = "float32" if to == TensorProto.FLOAT else paddle_dtype(to)
    if x.dtype == paddle.float64 and target in _FOUR_BYTES:  # a FLOAT input in a float64 run
        x = paddle.cast(x, "float32")
    y = paddle.view(x, target)
    return paddle.cast(y, float_dtype()) if to == TensorProto.FLOAT else y


@register("paddle", "QLinearMatMul")
def qlinear_matmul(
    call: NodeCall, a: Tensor, a_scale: Tensor, a_zero: Tensor, b: Tensor, b_scale: Tensor,
    b_zero: Tensor, y_scale: Tensor, y_zero: Tensor,
) -> Tensor:  # fmt: skip
    """ONNX QLinearMatMul: the integer product of the zero-point-shifted operands
    (``paddle.matmul`` in int64, exact), scaled by ``a_scale * b_scale / y_scale``,
    rounded half to even, shifted by ``y_zero_point`` and saturated to its type.
    """
    a64 = paddle.cast(a, "int64") - paddle.cast(a_zero, "int64")
    b64 = paddle.cast(b, "int64") - paddle.cast(b_zero, "int64")
    product = paddle.matmul(a64, b64)
    factor = a_scale * b_scale / y_scale
    y = paddle.round(paddle.cast(product, factor.dtype) * factor)
    y = y + paddle.cast(y_zero, factor.dtype)
    low, high = _INT_RANGE[y_zero.dtype]
    return paddle.cast(paddle.clip(y, low, high), y_zero.dtype)
