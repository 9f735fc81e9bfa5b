"""Activations and softmax, with ``paddle.nn.functional``."""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

from anpred.translate.registry import NodeCall, register

Tensor = Any


@register("paddle", "Relu")
def relu(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Relu."""
    return F.relu(x)


@register("paddle", "LeakyRelu")
def leaky_relu(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX LeakyRelu (alpha defaults to 0.01)."""
    return F.leaky_relu(x, negative_slope=float(call.attr("alpha", 0.01)))


@register("paddle", "Sigmoid")
def sigmoid(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Sigmoid."""
    return F.sigmoid(x)


@register("paddle", "Tanh")
def tanh(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Tanh."""
    return paddle.tanh(x)


@register("paddle", "Elu")
def elu(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Elu (alpha defaults to 1)."""
    return F.elu(x, alpha=float(call.attr("alpha", 1.0)))


@register("paddle", "Softplus")
def softplus(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Softplus."""
    return F.softplus(x)


@register("paddle", "Gelu", since=20)
def gelu(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Gelu (opset 20; ``approximate`` none or tanh)."""
    return F.gelu(x, approximate=call.attr("approximate", "none") == "tanh")


@register("paddle", "HardSigmoid")
def hard_sigmoid(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX HardSigmoid: max(0, min(1, alpha * x + beta)), alpha 0.2 and beta 0.5 by default."""
    alpha = float(call.attr("alpha", 0.2))
    beta = float(call.attr("beta", 0.5))
    return F.hardsigmoid(x, slope=alpha, offset=beta)


@register("paddle", "HardSwish")
def hard_swish(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX HardSwish: x * max(0, min(1, x / 6 + 1 / 2))."""
    return F.hardswish(x)


def _clip_bound(value: np.ndarray | None, tensor: Tensor) -> Any:
    if value is not None:
        return float(np.asarray(value).item())
    return tensor


@register("paddle", "Clip")
def clip_attrs(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Clip before opset 11 (``min`` / ``max`` attributes)."""
    return paddle.clip(x, min=call.attr("min"), max=call.attr("max"))


@register("paddle", "Clip", since=11)
def clip(call: NodeCall, x: Tensor, low: Tensor = None, high: Tensor = None) -> Tensor:
    """ONNX Clip (opset 11+: optional ``min`` / ``max`` inputs, static or tensors)."""
    low = _clip_bound(call.const(1), low)
    high = _clip_bound(call.const(2), high)
    if isinstance(low, float | None) and isinstance(high, float | None):
        if low is None and high is None:
            return x
        return paddle.clip(x, min=low, max=high)
    result = x if low is None else paddle.maximum(x, low)
    return result if high is None else paddle.minimum(result, high)


def _softmax_2d(call: NodeCall, x: Tensor, fn: Any) -> Tensor:
    """Softmax before opset 13: flatten to 2-D at ``axis`` (default 1), apply, reshape."""
    axis = int(call.attr("axis", 1))
    shape = list(x.shape)
    axis = axis + len(shape) if axis < 0 else axis
    inner = int(np.prod(shape[axis:], dtype=np.int64))
    flat = paddle.reshape(x, [-1, inner])
    return paddle.reshape(fn(flat, axis=1), shape)


@register("paddle", "Softmax")
def softmax_2d(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Softmax before opset 13 (coerced to 2-D)."""
    return _softmax_2d(call, x, F.softmax)


@register("paddle", "Softmax", since=13)
def softmax(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Softmax (opset 13+: along ``axis``, default -1)."""
    return F.softmax(x, axis=int(call.attr("axis", -1)))


@register("paddle", "LogSoftmax")
def log_softmax_2d(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX LogSoftmax before opset 13 (coerced to 2-D)."""
    return _softmax_2d(call, x, F.log_softmax)


@register("paddle", "LogSoftmax", since=13)
def log_softmax(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX LogSoftmax (opset 13+: along ``axis``, default -1)."""
    return F.log_softmax(x, axis=int(call.attr("axis", -1)))
