"""Element-wise arithmetic, comparison, selection and type ops, with paddle's own kernels.

Broadcasting follows NumPy rules in both ONNX (opset 7+) and paddle, so binary ops map
one to one.
"""

from __future__ import annotations

from typing import Any

import paddle

from anpred.translate.paddle.dtypes import paddle_dtype
from anpred.translate.registry import NodeCall, register

Tensor = Any


@register("paddle", "Div")
def div(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
    """ONNX Div (integer division truncates toward zero, as ONNX specifies)."""
    if a.is_floating_point():
        return paddle.divide(a, b)
    return paddle.divide(a, b, rounding_mode="trunc")


@register("paddle", "Pow")
def pow_(call: NodeCall, x: Tensor, y: Tensor) -> Tensor:
    """ONNX Pow; the exponent may have another type and is cast to the base's type."""
    if y.dtype != x.dtype:
        y = paddle.cast(y, x.dtype)
    return paddle.pow(x, y)


@register("paddle", "Mod", since=10)
def mod(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
    """ONNX Mod: sign of the divisor (``fmod=0``) or of the dividend (``fmod=1``, C fmod)."""
    if not call.attr("fmod", 0):
        return paddle.remainder(a, b)
    return paddle.multiply(paddle.sign(a), paddle.remainder(paddle.abs(a), paddle.abs(b)))


def _binary(op_type: str, fn: Any) -> None:
    def translate(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
        return fn(a, b)

    translate.__name__ = op_type.lower()
    translate.__doc__ = f"ONNX {op_type}."
    register("paddle", op_type)(translate)


for _op_type, _fn in {
    "Add": paddle.add,
    "Sub": paddle.subtract,
    "Mul": paddle.multiply,
    "Equal": paddle.equal,
    "Greater": paddle.greater_than,
    "Less": paddle.less_than,
}.items():
    _binary(_op_type, _fn)


def _unary(op_type: str, fn: Any) -> None:
    def translate(call: NodeCall, x: Tensor) -> Tensor:
        return fn(x)

    translate.__name__ = op_type.lower()
    translate.__doc__ = f"ONNX {op_type}."
    register("paddle", op_type)(translate)


for _op_type, _fn in {
    "Sqrt": paddle.sqrt,
    "Erf": paddle.erf,
    "Exp": paddle.exp,
    "Log": paddle.log,
    "Neg": paddle.neg,
    "Abs": paddle.abs,
    "Reciprocal": paddle.reciprocal,
    "Floor": paddle.floor,
    "Ceil": paddle.ceil,
    "Sin": paddle.sin,
    "Cos": paddle.cos,
    "Not": paddle.logical_not,
}.items():
    _unary(_op_type, _fn)


@register("paddle", "Where")
def where(call: NodeCall, condition: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """ONNX Where (broadcasting all three inputs)."""
    return paddle.where(condition, x, y)


@register("paddle", "Min")
def min_(call: NodeCall, *inputs: Tensor) -> Tensor:
    """ONNX Min over any number of inputs."""
    result = inputs[0]
    for x in inputs[1:]:
        result = paddle.minimum(result, x)
    return result


@register("paddle", "Max")
def max_(call: NodeCall, *inputs: Tensor) -> Tensor:
    """ONNX Max over any number of inputs."""
    result = inputs[0]
    for x in inputs[1:]:
        result = paddle.maximum(result, x)
    return result


@register("paddle", "Cast")
def cast(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Cast; a cast to FLOAT follows the graph's float dtype (float64 runs stay fp64)."""
    dtype = paddle_dtype(int(call.attr("to")))
    return x if x.dtype == getattr(paddle, dtype) else paddle.cast(x, dtype)


@register("paddle", "Identity")
def identity(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Identity."""
    return x


@register("paddle", "Dropout")
def dropout(call: NodeCall, x: Tensor, ratio: Tensor = None, training: Tensor = None) -> Any:
    """ONNX Dropout at inference: the identity (and an all-true mask when asked for)."""
    if len(call.output_shapes) > 1:
        return x, paddle.ones_like(x, dtype="bool")
    return x
