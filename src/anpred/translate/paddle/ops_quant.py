"""QuantizeLinear and DequantizeLinear, composed from paddle ops.

Paddle's quantization kernels (``paddle.quantization``, fake-quant ops) are training-time
simulators with their own rounding and range rules, so the linear (de)quantizers are
composed: ``paddle.round`` (half to even, measured) of ``x / scale`` plus the zero point,
clipped to the integer type's range before ``paddle.cast``; per-axis and blocked scales
are broadcast along ``axis`` (``paddle.repeat_interleave`` for blocks). Integer element
types paddle has only (int8, uint8, int16, int32; no float8/int4/uint16).
"""

from __future__ import annotations

from typing import Any

import paddle

from anpred.errors import UsageError
from anpred.translate.paddle.dtypes import paddle_dtype
from anpred.translate.registry import NodeCall, register

Tensor = Any

#: Saturation bounds of the integer types paddle has.
_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
           "int32": (-(2**31), 2**31 - 1)}  # fmt: skip


def _name(dtype: Any) -> str:
    return str(dtype).replace("paddle.", "")


def _expand(call: NodeCall, param: Tensor, x: Tensor) -> Tensor:
    """A scale or zero point broadcast against ``x`` (scalar, per-axis or blocked)."""
    if param.ndim == 0 or (param.ndim == 1 and int(param.shape[0]) == 1):
        return paddle.reshape(param, [])
    axis = int(call.attr("axis", 1)) % x.ndim
    block = int(call.attr("block_size", 0))
    if block:
        repeated = paddle.repeat_interleave(param, block, axis=axis)
        return paddle.slice(repeated, [axis], [0], [int(x.shape[axis])])
    shape = [1] * x.ndim
    shape[axis] = -1
    return paddle.reshape(param, shape)


@register("paddle", "QuantizeLinear", since=10)
def quantize_linear(call: NodeCall, x: Tensor, scale: Tensor, zero: Tensor = None) -> Tensor:
    """ONNX QuantizeLinear: ``saturate(round(x / scale) + zero_point)`` (composed)."""
    if zero is not None:
        out = _name(zero.dtype)
    elif call.attr("output_dtype"):
        out = paddle_dtype(int(call.attr("output_dtype")))
    else:
        out = "uint8"
    if out not in _RANGES:
        raise UsageError(f"node {call.name}: QuantizeLinear to {out} is not translated")
    low, high = _RANGES[out]
    work = "float64" if x.dtype == paddle.float64 else "float32"
    y = paddle.round(paddle.cast(x, work) / paddle.cast(_expand(call, scale, x), work))
    if zero is not None:
        y = y + _expand(call, paddle.cast(zero, work), x)  # paddle repeats no uint8
    return paddle.cast(paddle.clip(y, low, high), out)


@register("paddle", "DequantizeLinear", since=10)
def dequantize_linear(call: NodeCall, x: Tensor, scale: Tensor, zero: Tensor = None) -> Tensor:
    """ONNX DequantizeLinear: ``(x - zero_point) * scale`` in the scale's float type."""
    work = scale.dtype
    shifted = paddle.cast(x, "int64" if not x.is_floating_point() else work)
    if zero is not None:
        shifted = shifted - _expand(call, paddle.cast(zero, shifted.dtype), x)
    return paddle.cast(shifted, work) * _expand(call, scale, x)
