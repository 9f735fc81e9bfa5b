"""More elementwise ops with ``paddle`` / ``paddle.nn.functional``: trigonometry, rounding,
logic, comparisons, activations, CastLike, run-time Shape and Size, ArgMax/ArgMin.

Float attributes (defaults included) are float32 values, as ONNX stores them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

from anpred.translate.paddle.dtypes import float_dtype
from anpred.translate.registry import NodeCall, register

Tensor = Any


def _f32(call: NodeCall, key: str, default: float) -> float:
    return float(np.float32(call.attr(key, default)))


def _unary(op_type: str, fn: Any) -> None:
    def translate(call: NodeCall, x: Tensor) -> Tensor:
        return fn(x)

    translate.__name__ = op_type.lower()
    translate.__doc__ = f"ONNX {op_type}."
    register("paddle", op_type)(translate)


def _binary(op_type: str, fn: Any) -> None:
    def translate(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
        return fn(a, b)

    translate.__name__ = op_type.lower()
    translate.__doc__ = f"ONNX {op_type}."
    register("paddle", op_type)(translate)


for _op_type, _fn in {
    "Tan": paddle.tan,
    "Asin": paddle.asin,
    "Acos": paddle.acos,
    "Atan": paddle.atan,
    "Sinh": paddle.sinh,
    "Cosh": paddle.cosh,
    "Asinh": paddle.asinh,
    "Acosh": paddle.acosh,
    "Atanh": paddle.atanh,
    "Round": paddle.round,  # half to even, as ONNX
    "Sign": paddle.sign,
    "IsNaN": paddle.isnan,
    "Softsign": F.softsign,
    "Mish": F.mish,
}.items():
    _unary(_op_type, _fn)

for _op_type, _fn in {
    "GreaterOrEqual": paddle.greater_equal,
    "LessOrEqual": paddle.less_equal,
    "And": paddle.logical_and,
    "Or": paddle.logical_or,
    "Xor": paddle.logical_xor,
}.items():
    _binary(_op_type, _fn)


@register("paddle", "IsInf")
def is_inf(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX IsInf: ``paddle.isinf``, restricted by ``detect_positive``/``detect_negative``."""
    inf = paddle.isinf(x)
    if not call.attr("detect_positive", 1):
        inf = paddle.logical_and(inf, x < 0)
    if not call.attr("detect_negative", 1):
        inf = paddle.logical_and(inf, x > 0)
    return inf


@register("paddle", "Selu")
def selu(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Selu: ``F.selu`` with the node's float32 constants."""
    alpha = _f32(call, "alpha", 1.67326319217681884765625)
    gamma = _f32(call, "gamma", 1.05070102214813232421875)
    return F.selu(x, scale=gamma, alpha=alpha)


@register("paddle", "Celu")
def celu(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Celu (``alpha`` default 1)."""
    return F.celu(x, alpha=_f32(call, "alpha", 1.0))


@register("paddle", "ThresholdedRelu")
def thresholded_relu(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX ThresholdedRelu: ``F.thresholded_relu`` (``x`` above ``alpha``, else 0)."""
    return F.thresholded_relu(x, threshold=_f32(call, "alpha", 1.0))


@register("paddle", "Swish")
def swish(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Swish ``x * sigmoid(alpha * x)``; ``F.silu`` for ``alpha`` 1."""
    alpha = _f32(call, "alpha", 1.0)
    return F.silu(x) if alpha == 1.0 else x * F.sigmoid(x * alpha)


@register("paddle", "Shrink")
def shrink(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Shrink: ``x + bias`` below ``-lambd``, ``x - bias`` above ``lambd``, else 0."""
    lambd, bias = _f32(call, "lambd", 0.5), _f32(call, "bias", 0.0)
    if paddle.is_floating_point(x) and bias == lambd:
        return F.softshrink(x, threshold=lambd)
    wide = x if paddle.is_floating_point(x) else paddle.cast(x, "float64")
    low, high = paddle.cast(wide + bias, x.dtype), paddle.cast(wide - bias, x.dtype)
    return paddle.where(wide < -lambd, low, paddle.where(wide > lambd, high, paddle.zeros_like(x)))


@register("paddle", "PRelu")
def prelu(call: NodeCall, x: Tensor, slope: Tensor) -> Tensor:
    """ONNX PRelu: ``slope * x`` where ``x < 0`` (the slope broadcasts)."""
    return paddle.where(x < 0, x * slope, x)


@register("paddle", "CastLike")
def cast_like(call: NodeCall, x: Tensor, target: Tensor) -> Tensor:
    """ONNX CastLike: ``paddle.cast`` to the target's type (a float follows the graph's)."""
    dtype = float_dtype() if paddle.is_floating_point(target) else target.dtype
    return paddle.cast(x, dtype)


@register("paddle", "Size")
def size(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Size: the number of elements, an int64 scalar."""
    return paddle.cast(paddle.numel(x), "int64").reshape([])


def _arg(pick: Any) -> Any:
    def translate(call: NodeCall, x: Tensor) -> Tensor:
        axis = int(call.attr("axis", 0)) % x.ndim
        keepdim = bool(call.attr("keepdims", 1))
        if call.attr("select_last_index", 0):
            last = pick(paddle.flip(x, axis=[axis]), axis=axis, keepdim=keepdim, dtype="int64")
            return x.shape[axis] - 1 - last
        return pick(x, axis=axis, keepdim=keepdim, dtype="int64")

    return translate


register("paddle", "ArgMax")(_arg(paddle.argmax))  # the first maximum, as ONNX
register("paddle", "ArgMin")(_arg(paddle.argmin))


@register("paddle", "SwiGLU")
def swiglu(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
    """ONNX SwiGLU ``a * sigmoid(alpha * a) * b``; ``F.silu`` for ``alpha`` 1."""
    alpha = _f32(call, "alpha", 1.0)
    gate = F.silu(a) if alpha == 1.0 else a * F.sigmoid(a * alpha)
    return gate * b
