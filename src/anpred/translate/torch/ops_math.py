"""Element-wise maths torch translators: trigonometry, rounding, logic, comparisons, casts.

Also the small ops an exporter or an ONNX function body emits around them: CastLike,
run-time Shape and Size, Det, Einsum, CumSum, Trilu, BitCast, QLinearMatMul.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from anpred.translate.registry import NodeCall, register
from anpred.translate.torch.adapter import run_float
from anpred.translate.torch.ops_elementwise import ONNX_TO_TORCH

_LIB = "torch"

Tensor = torch.Tensor


def _unary(fn: Callable[[Tensor], Tensor]) -> Callable[..., Tensor]:
    def translate(call: NodeCall, x: Tensor) -> Tensor:
        return fn(x)

    return translate


def _binary(fn: Callable[[Tensor, Tensor], Tensor]) -> Callable[..., Tensor]:
    def translate(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
        return fn(a, b)

    return translate


_UNARY: dict[str, Callable[[Tensor], Tensor]] = {
    "Reciprocal": torch.reciprocal,
    "Sin": torch.sin,
    "Cos": torch.cos,
    "Tan": torch.tan,
    "Asin": torch.asin,
    "Acos": torch.acos,
    "Atan": torch.atan,
    "Sinh": torch.sinh,
    "Cosh": torch.cosh,
    "Asinh": torch.asinh,
    "Acosh": torch.acosh,
    "Atanh": torch.atanh,
    "Ceil": torch.ceil,
    "Round": torch.round,  # half to even, as ONNX
    "Sign": torch.sign,
    "IsNaN": torch.isnan,
    "Not": torch.logical_not,
    "BitwiseNot": torch.bitwise_not,
}
for _op, _fn in _UNARY.items():
    register(_LIB, _op)(_unary(_fn))

_BINARY: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "Greater": torch.gt,
    "Less": torch.lt,
    "GreaterOrEqual": torch.ge,
    "LessOrEqual": torch.le,
    "And": torch.logical_and,
    "Or": torch.logical_or,
    "Xor": torch.logical_xor,
    "BitwiseAnd": torch.bitwise_and,
    "BitwiseOr": torch.bitwise_or,
    "BitwiseXor": torch.bitwise_xor,
}
for _op, _fn in _BINARY.items():
    register(_LIB, _op)(_binary(_fn))


@register(_LIB, "IsInf")
def is_inf(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX IsInf: ``detect_positive`` and ``detect_negative`` (both default 1)."""
    positive, negative = call.attr("detect_positive", 1), call.attr("detect_negative", 1)
    if positive and negative:
        return torch.isinf(x)
    if positive:
        return torch.isposinf(x)
    if negative:
        return torch.isneginf(x)
    return torch.zeros_like(x, dtype=torch.bool)


@register(_LIB, "CastLike")
def cast_like(call: NodeCall, x: Tensor, target: Tensor) -> Tensor:
    """ONNX CastLike: ``x`` in ``target``'s type (a float64 run keeps floats in float64)."""
    return x.to(run_float(target.dtype))


@register(_LIB, "Shape")
def shape(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Shape of a tensor whose shape is not known statically (``start``, ``end``)."""
    start, end = call.attr("start", 0), call.attr("end")
    return torch.tensor(list(x.shape)[start:end], dtype=torch.int64)


@register(_LIB, "Size")
def size(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Size: the number of elements, an int64 scalar."""
    return torch.tensor(x.numel(), dtype=torch.int64)


@register(_LIB, "Det")
def det(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Det of (batches of) square matrices."""
    return torch.linalg.det(x)


@register(_LIB, "Einsum")
def einsum(call: NodeCall, *inputs: Tensor) -> Tensor:
    """ONNX Einsum (numpy's equation syntax, as ``torch.einsum``)."""
    return torch.einsum(str(call.attr("equation")).replace(" ", ""), *inputs)


@register(_LIB, "CumSum")
def cumsum(call: NodeCall, x: Tensor, axis: Tensor) -> Tensor:
    """ONNX CumSum along ``axis`` (an input); ``exclusive`` and ``reverse`` attributes."""
    static = call.const(1)
    dim = int(np.asarray(static).reshape(-1)[0]) if static is not None else int(axis.item())
    dim %= x.ndim
    if call.attr("reverse", 0):
        x = torch.flip(x, dims=(dim,))
    y = torch.cumsum(x, dim=dim)
    if call.attr("exclusive", 0):  # the sums before each element: shifted by one, 0 first
        head = torch.zeros_like(torch.narrow(y, dim, 0, 1))
        y = torch.cat([head, torch.narrow(y, dim, 0, x.shape[dim] - 1)], dim=dim)
    if call.attr("reverse", 0):
        y = torch.flip(y, dims=(dim,))
    return y.to(x.dtype)


@register(_LIB, "Trilu")
def trilu(call: NodeCall, x: Tensor, k: Tensor | None = None) -> Tensor:
    """ONNX Trilu: the upper (default) or lower triangle from diagonal ``k``."""
    static = call.const(1)
    if static is not None:
        offset = int(np.asarray(static).reshape(-1)[0])
    else:
        offset = 0 if k is None else int(k.item())
    return torch.triu(x, offset) if call.attr("upper", 1) else torch.tril(x, offset)


@register(_LIB, "BitCast")
def bit_cast(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX BitCast: the same bits as another type of the same width (``Tensor.view``).

    Bits are a property of the ONNX type: in a float64 run a float input is taken back to
    the float32 it stands for first, and a float result is widened after.
    """
    target = ONNX_TO_TORCH[int(call.attr("to"))]
    if x.dtype == torch.float64 and target.itemsize == 4:
        x = x.to(torch.float32)
    return x.view(target).to(run_float(target))


@register(_LIB, "QLinearMatMul")
def qlinear_matmul(
    call: NodeCall, a: Tensor, a_scale: Tensor, a_zero: Tensor, b: Tensor, b_scale: Tensor,
    b_zero: Tensor, y_scale: Tensor, y_zero: Tensor,
) -> Tensor:  # fmt: skip
    """ONNX QLinearMatMul: the integer product of the zero-point-shifted operands
    (``torch.matmul`` in int64, exact), scaled by ``a_scale * b_scale / y_scale``,
    rounded half to even, shifted by ``y_zero_point`` and saturated to its type.
    """
    product = torch.matmul(a.to(torch.int64) - a_zero.to(torch.int64),
                           b.to(torch.int64) - b_zero.to(torch.int64))  # fmt: skip
    factor = a_scale * b_scale / y_scale
    y = torch.round(product.to(factor.dtype) * factor) + y_zero.to(factor.dtype)
    info = torch.iinfo(y_zero.dtype)
    return torch.clamp(y, info.min, info.max).to(y_zero.dtype)
