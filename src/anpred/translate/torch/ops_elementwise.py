"""Element-wise torch translators: arithmetic, activations, comparisons, casts, selection.

ONNX float attributes, their defaults included, are float32 values; defaults are written
as such so that a float64 run computes exactly what the ONNX node says.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
import onnx
import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name

from anpred.translate.registry import NodeCall, register
from anpred.translate.torch.adapter import run_float

_LIB = "torch"

Tensor = torch.Tensor


def _unary(fn: Callable[[Tensor], Tensor]) -> Callable[..., Tensor]:
    def translate(call: NodeCall, x: Tensor) -> Tensor:
        return fn(x)

    return translate


_UNARY: dict[str, Callable[[Tensor], Tensor]] = {
    "Sqrt": torch.sqrt,
    "Erf": torch.erf,
    "Exp": torch.exp,
    "Log": torch.log,
    "Neg": torch.neg,
    "Abs": torch.abs,
    "Tanh": torch.tanh,
    "Sigmoid": torch.sigmoid,
    "Relu": torch.relu,
    "HardSwish": F.hardswish,
    "Identity": lambda x: x,
}
for _op, _fn in _UNARY.items():
    register(_LIB, _op)(_unary(_fn))


@register(_LIB, "Add")
def add(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
    """ONNX Add (numpy broadcasting)."""
    return torch.add(a, b)


@register(_LIB, "Sub")
def sub(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
    """ONNX Sub."""
    return torch.sub(a, b)


@register(_LIB, "Mul")
def mul(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
    """ONNX Mul."""
    return torch.mul(a, b)


@register(_LIB, "Div")
def div(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
    """ONNX Div; integer division truncates toward zero, as in C."""
    if a.dtype.is_floating_point:
        return torch.div(a, b)
    return torch.div(a, b, rounding_mode="trunc")


@register(_LIB, "Pow")
def pow_(call: NodeCall, base: Tensor, exponent: Tensor) -> Tensor:
    """ONNX Pow; the result has the base's type."""
    return torch.pow(base, exponent).to(base.dtype)


@register(_LIB, "LeakyRelu")
def leaky_relu(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX LeakyRelu (``alpha`` default 0.01)."""
    return F.leaky_relu(x, float(call.attr("alpha", np.float32(0.01))))


@register(_LIB, "HardSigmoid")
def hard_sigmoid(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX HardSigmoid ``max(0, min(1, alpha*x + beta))``; torch's kernel for 1/6, 1/2."""
    alpha, beta = float(call.attr("alpha", np.float32(0.2))), float(call.attr("beta", 0.5))
    if abs(alpha - 1.0 / 6.0) < 1e-7 and beta == 0.5:
        return F.hardsigmoid(x)
    return torch.clamp(x * alpha + beta, 0.0, 1.0)


@register(_LIB, "Clip")
def clip(
    call: NodeCall, x: Tensor, low: Tensor | None = None, high: Tensor | None = None
) -> Tensor:
    """ONNX Clip: bounds as optional inputs (opset 11+) or attributes (before)."""
    if call.opset < 11:
        low_value, high_value = call.attr("min"), call.attr("max")
        return torch.clamp(x, low_value, high_value)
    if low is None and high is None:
        return x
    return torch.clamp(x, low, high)


@register(_LIB, "Softmax")
def softmax_flattened(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Softmax before opset 13: over all axes from ``axis`` on (input seen as 2-D)."""
    axis = call.attr("axis", 1) % x.ndim
    rows = math.prod(x.shape[:axis])
    return torch.softmax(x.reshape(rows, -1), dim=1).reshape(x.shape)


@register(_LIB, "Softmax", since=13)
def softmax(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Softmax (opset 13+): along one axis (default -1)."""
    return torch.softmax(x, dim=call.attr("axis", -1))


@register(_LIB, "Where")
def where(call: NodeCall, condition: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """ONNX Where."""
    return torch.where(condition, a, b)


@register(_LIB, "Equal")
def equal(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
    """ONNX Equal (bool result)."""
    return torch.eq(a, b)


@register(_LIB, "Min")
def minimum(call: NodeCall, *inputs: Tensor) -> Tensor:
    """ONNX Min over any number of broadcast inputs."""
    return functools.reduce(torch.minimum, inputs)


@register(_LIB, "Max")
def maximum(call: NodeCall, *inputs: Tensor) -> Tensor:
    """ONNX Max over any number of broadcast inputs."""
    return functools.reduce(torch.maximum, inputs)


@register(_LIB, "Dropout")
def dropout(
    call: NodeCall, x: Tensor, ratio: Tensor | None = None, training: Tensor | None = None
) -> Tensor | tuple[Tensor, Tensor]:
    """ONNX Dropout in inference: the identity (and an all-true mask when asked for)."""
    mode = call.const(2)
    if mode is not None and bool(mode):
        raise NotImplementedError("Dropout with training_mode=True is not an inference op")
    if len(call.output_shapes) > 1:
        return x, torch.ones_like(x, dtype=torch.bool)
    return x


ONNX_TO_TORCH: dict[int, torch.dtype] = {
    onnx.TensorProto.FLOAT: torch.float32,
    onnx.TensorProto.DOUBLE: torch.float64,
    onnx.TensorProto.FLOAT16: torch.float16,
    onnx.TensorProto.BFLOAT16: torch.bfloat16,
    onnx.TensorProto.INT64: torch.int64,
    onnx.TensorProto.INT32: torch.int32,
    onnx.TensorProto.INT16: torch.int16,
    onnx.TensorProto.INT8: torch.int8,
    onnx.TensorProto.UINT8: torch.uint8,
    onnx.TensorProto.BOOL: torch.bool,
}


@register(_LIB, "Cast")
def cast(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Cast (float to int truncates toward zero); float targets follow a float64 run."""
    target = int(call.attr("to"))
    if target not in ONNX_TO_TORCH:
        raise NotImplementedError(f"Cast to ONNX type {target} is not supported by torch")
    return x.to(run_float(ONNX_TO_TORCH[target]))


@register(_LIB, "Mod")
def mod(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
    """ONNX Mod: sign of the divisor (``fmod=0``, integers) or of the dividend (``fmod=1``)."""
    if call.attr("fmod", 0):
        return torch.fmod(a, b)
    return torch.remainder(a, b)


@register(_LIB, "Sum")
def total(call: NodeCall, *inputs: Tensor) -> Tensor:
    """ONNX Sum over any number of broadcast inputs (added left to right)."""
    return functools.reduce(torch.add, inputs)


@register(_LIB, "Mean")
def mean(call: NodeCall, *inputs: Tensor) -> Tensor:
    """ONNX Mean: the Sum of the inputs divided by their number."""
    return torch.div(functools.reduce(torch.add, inputs), len(inputs))


@register(_LIB, "Floor")
def floor(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Floor."""
    return torch.floor(x)
