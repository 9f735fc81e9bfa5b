"""More ONNX ops with ``jax.numpy`` / ``jax.nn`` / ``lax``: trigonometry, IsNaN/IsInf, the ELU
family, Softsign, Mish, Swish, ThresholdedRelu, Shrink, RMS/Lp normalisation, Hardmax,
GatherElements and TopK.

Under ``jax.jit`` every shape is static: TopK's ``k`` must be a constant (it is, in an
exported model). Float attributes (defaults included) are float32 values.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from anpred.translate.jax.numerics import index_dtype
from anpred.translate.jax.registration import register
from anpred.translate.jax.static import static_ints
from anpred.translate.registry import NodeCall


def _f32(call: NodeCall, key: str, default: float) -> float:
    return float(np.float32(call.attr(key, default)))


_UNARY = {
    "Tan": jnp.tan,
    "Asin": jnp.arcsin,
    "Acos": jnp.arccos,
    "Atan": jnp.arctan,
    "Sinh": jnp.sinh,
    "Cosh": jnp.cosh,
    "Asinh": jnp.arcsinh,
    "Acosh": jnp.arccosh,
    "Atanh": jnp.arctanh,
    "IsNaN": jnp.isnan,
    "Softsign": jax.nn.soft_sign,
    "Mish": lambda x: x * jnp.tanh(jax.nn.softplus(x)),
}


def _unary(fn: Any) -> Any:
    def translate(call: NodeCall, x: Any) -> Any:
        return fn(x)

    return translate


for _op, _fn in _UNARY.items():
    register(_op)(_unary(_fn))


@register("IsInf")
def is_inf(call: NodeCall, x: Any) -> Any:
    """``jnp.isinf`` restricted by ``detect_positive`` / ``detect_negative``."""
    positive, negative = call.attr("detect_positive", 1), call.attr("detect_negative", 1)
    if positive and negative:
        return jnp.isinf(x)
    if positive:
        return jnp.isposinf(x)
    if negative:
        return jnp.isneginf(x)
    return jnp.zeros(x.shape, dtype=bool)


@register("Selu")
def selu(call: NodeCall, x: Any) -> Any:
    """``gamma * elu(x, alpha)`` with the node's float32 constants."""
    alpha = _f32(call, "alpha", 1.67326319217681884765625)
    gamma = _f32(call, "gamma", 1.05070102214813232421875)
    return jax.nn.elu(x, alpha=alpha) * gamma


@register("Celu")
def celu(call: NodeCall, x: Any) -> Any:
    """``jax.nn.celu`` (``alpha`` default 1)."""
    return jax.nn.celu(x, alpha=_f32(call, "alpha", 1.0))


@register("Swish")
def swish(call: NodeCall, x: Any) -> Any:
    """``x * sigmoid(alpha * x)``; ``jax.nn.silu`` for ``alpha`` 1."""
    alpha = _f32(call, "alpha", 1.0)
    return jax.nn.silu(x) if alpha == 1.0 else x * jax.nn.sigmoid(x * alpha)


@register("ThresholdedRelu")
def thresholded_relu(call: NodeCall, x: Any) -> Any:
    """``x`` where ``x > alpha`` (default 1), else 0."""
    return jnp.where(x > _f32(call, "alpha", 1.0), x, jnp.zeros_like(x))


@register("Shrink")
def shrink(call: NodeCall, x: Any) -> Any:
    """``x + bias`` below ``-lambd``, ``x - bias`` above ``lambd``, else 0."""
    lambd, bias = _f32(call, "lambd", 0.5), _f32(call, "bias", 0.0)
    wide = x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.float32)
    low, high = (wide + bias).astype(x.dtype), (wide - bias).astype(x.dtype)
    return jnp.where(wide < -lambd, low, jnp.where(wide > lambd, high, jnp.zeros_like(x)))


@register("RMSNormalization", since=23)
def rms_norm(call: NodeCall, x: Any, scale: Any) -> Any:
    """``x * rsqrt(mean(x^2 over the axes from axis on) + epsilon) * scale`` (composed)."""
    axis = int(call.attr("axis", -1)) % x.ndim
    square = jnp.mean(x * x, axis=tuple(range(axis, x.ndim)), keepdims=True)
    return x * lax.rsqrt(square + _f32(call, "epsilon", 1e-5)) * scale


@register("LpNormalization")
def lp_norm(call: NodeCall, x: Any) -> Any:
    """``x / ||x||_p`` along ``axis`` (``jnp.linalg.norm``); a zero norm gives 0."""
    axis = int(call.attr("axis", -1)) % x.ndim
    norm = jnp.linalg.norm(x, ord=int(call.attr("p", 2)), axis=axis, keepdims=True)
    return jnp.where(norm == 0, jnp.zeros_like(x), x / jnp.where(norm == 0, 1, norm))


@register("Hardmax", since=13)
def hardmax(call: NodeCall, x: Any) -> Any:
    """1 at the first maximum along ``axis`` (``jax.nn.one_hot`` of ``argmax``)."""
    axis = int(call.attr("axis", -1)) % x.ndim
    hot = jax.nn.one_hot(jnp.argmax(x, axis=axis), x.shape[axis], dtype=x.dtype)
    return jnp.moveaxis(hot, -1, axis)


@register("GatherElements")
def gather_elements(call: NodeCall, x: Any, indices: Any) -> Any:
    """``jnp.take_along_axis`` (negative indices from the end)."""
    axis = int(call.attr("axis", 0)) % x.ndim
    indices = jnp.where(indices < 0, indices + x.shape[axis], indices)
    return jnp.take_along_axis(x, indices, axis=axis)


@register("TopK", since=10)
def top_k(call: NodeCall, x: Any, k: Any) -> tuple[Any, Any]:
    """``lax.top_k`` on the axis moved last (smallest: on ``-x``); ``k`` must be static."""
    (count,) = static_ints(call, 1, k, "k")
    axis = int(call.attr("axis", -1)) % x.ndim
    moved = jnp.moveaxis(x, axis, -1)
    largest = bool(call.attr("largest", 1))
    values, indices = lax.top_k(moved if largest else -moved, count)
    values = values if largest else -values
    return jnp.moveaxis(values, -1, axis), jnp.moveaxis(indices, -1, axis).astype(index_dtype())


@register("Det")
def det(call: NodeCall, x: Any) -> Any:
    """ONNX Det of (batches of) square matrices: ``jnp.linalg.det``."""
    return jnp.linalg.det(x)
