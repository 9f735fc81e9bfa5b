"""Activation ONNX ops: Relu and friends, Softmax, Dropout (inference)."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from anpred.errors import UsageError
from anpred.translate.jax.registration import register
from anpred.translate.jax.static import static_floats
from anpred.translate.registry import NodeCall


@register("Relu")
def relu(call: NodeCall, x: Any) -> Any:
    """``max(x, 0)``."""
    return jax.nn.relu(x)


@register("Sigmoid")
def sigmoid(call: NodeCall, x: Any) -> Any:
    """Logistic sigmoid."""
    return jax.nn.sigmoid(x)


@register("LeakyRelu")
def leaky_relu(call: NodeCall, x: Any) -> Any:
    """Leaky ReLU with slope ``alpha`` (default 0.01)."""
    return jax.nn.leaky_relu(x, negative_slope=float(call.attr("alpha", 0.01)))


@register("PRelu")
def prelu(call: NodeCall, x: Any, slope: Any) -> Any:
    """ReLU with a learned (broadcast) negative slope."""
    return jnp.where(x < 0, slope * x, x)


@register("Elu")
def elu(call: NodeCall, x: Any) -> Any:
    """ELU with ``alpha`` (default 1)."""
    return jax.nn.elu(x, alpha=float(call.attr("alpha", 1.0)))


@register("Softplus")
def softplus(call: NodeCall, x: Any) -> Any:
    """``log(1 + exp(x))``."""
    return jax.nn.softplus(x)


@register("Gelu", since=20)
def gelu(call: NodeCall, x: Any) -> Any:
    """GELU, exact (``approximate="none"``) or the tanh approximation."""
    return jax.nn.gelu(x, approximate=call.attr("approximate", "none") == "tanh")


@register("HardSigmoid")
def hard_sigmoid(call: NodeCall, x: Any) -> Any:
    """``clip(alpha * x + beta, 0, 1)`` (ONNX defaults alpha=0.2, beta=0.5).

    ONNX float attributes are float32, defaults included: alpha is float32(0.2).
    """
    alpha = float(call.attr("alpha", float(np.float32(0.2))))
    beta = float(call.attr("beta", 0.5))
    return jnp.clip(alpha * x + beta, 0.0, 1.0)


@register("HardSwish")
def hard_swish(call: NodeCall, x: Any) -> Any:
    """``x * relu6(x + 3) / 6``."""
    return jax.nn.hard_swish(x)


@register("Clip")
def clip(call: NodeCall, x: Any, low: Any = None, high: Any = None) -> Any:
    """Clamp to ``[min, max]``; bounds are inputs from opset 11, attributes before."""
    if call.opset < 11:
        low = call.attr("min", -math.inf)
        high = call.attr("max", math.inf)
    if low is not None:
        x = jnp.maximum(x, low)
    if high is not None:
        x = jnp.minimum(x, high)
    return x


def _softmax_like(call: NodeCall, x: Any, fn: Any) -> Any:
    if call.opset >= 13:
        return fn(x, axis=int(call.attr("axis", -1)))
    # Opsets < 13 flatten to 2-D at ``axis`` (default 1) and normalise each row.
    axis = int(call.attr("axis", 1))
    axis = axis + x.ndim if axis < 0 else axis
    rows = math.prod(x.shape[:axis])
    return fn(x.reshape(rows, -1), axis=1).reshape(x.shape)


@register("Softmax")
def softmax(call: NodeCall, x: Any) -> Any:
    """Softmax along ``axis``."""
    return _softmax_like(call, x, jax.nn.softmax)


@register("LogSoftmax")
def log_softmax(call: NodeCall, x: Any) -> Any:
    """Log-softmax along ``axis``."""
    return _softmax_like(call, x, jax.nn.log_softmax)


@register("Dropout")
def dropout(call: NodeCall, x: Any, ratio: Any = None, training_mode: Any = None) -> Any:
    """Inference dropout: the identity, plus an all-true mask for the optional output."""
    training = static_floats(call, 2, training_mode, "training_mode")
    if training and training[0]:
        raise UsageError(f"Dropout node {call.name} runs in training mode; anpred runs inference")
    return x, jnp.ones(x.shape, dtype=bool)
