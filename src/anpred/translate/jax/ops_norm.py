"""Normalization ONNX ops (inference): BatchNormalization, LayerNormalization,
InstanceNormalization, GroupNormalization, LRN.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax import lax

from anpred.errors import UsageError
from anpred.translate.jax.registration import register
from anpred.translate.lrn_window import lrn_window
from anpred.translate.registry import NodeCall


def _per_channel(v: Any, ndim: int) -> Any:
    """Reshape a ``(C,)`` parameter to broadcast against an ``(N, C, ...)`` tensor."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


@register("BatchNormalization")
def batch_norm(call: NodeCall, x: Any, scale: Any, bias: Any, mean: Any, var: Any) -> Any:
    """Inference batch norm: ``(x - mean) * (rsqrt(var + eps) * scale) + bias``."""
    if call.attr("training_mode", 0):
        raise UsageError(f"BatchNormalization node {call.name} is in training mode")
    eps = float(call.attr("epsilon", 1e-5))
    factor = lax.rsqrt(var + eps) * scale
    return (x - _per_channel(mean, x.ndim)) * _per_channel(factor, x.ndim) + _per_channel(
        bias, x.ndim
    )


@register("LayerNormalization")
def layer_norm(call: NodeCall, x: Any, scale: Any, bias: Any = None) -> tuple[Any, Any, Any]:
    """Normalise over axes ``axis..rank-1``; also returns Mean and InvStdDev."""
    axis = int(call.attr("axis", -1))
    axis = axis + x.ndim if axis < 0 else axis
    axes = tuple(range(axis, x.ndim))
    eps = float(call.attr("epsilon", 1e-5))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    centred = x - mean
    inv_std = lax.rsqrt(jnp.mean(centred * centred, axis=axes, keepdims=True) + eps)
    y = centred * inv_std * scale
    if bias is not None:
        y = y + bias
    return y, mean, inv_std


@register("InstanceNormalization")
def instance_norm(call: NodeCall, x: Any, scale: Any, bias: Any) -> Any:
    """Normalise every (sample, channel) over its spatial axes."""
    axes = tuple(range(2, x.ndim))
    eps = float(call.attr("epsilon", 1e-5))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    centred = x - mean
    inv_std = lax.rsqrt(jnp.mean(centred * centred, axis=axes, keepdims=True) + eps)
    return centred * inv_std * _per_channel(scale, x.ndim) + _per_channel(bias, x.ndim)


@register("GroupNormalization")
def group_norm(call: NodeCall, x: Any, scale: Any, bias: Any) -> Any:
    """ONNX GroupNormalization, composed (jax has no group-norm kernel): every sample's
    ``num_groups`` groups of channels normalised over their channels and spatial axes
    (``jnp.mean`` of a ``(N, G, -1)`` view). Opset 21 gives scale and bias per channel;
    opset 18 gave them per group (repeated to the group's channels here).
    """
    groups = int(call.attr("num_groups"))
    channels = x.shape[1]
    eps = float(call.attr("epsilon", 1e-5))
    grouped = x.reshape((x.shape[0], groups, -1))
    centred = grouped - jnp.mean(grouped, axis=-1, keepdims=True)
    inv_std = lax.rsqrt(jnp.mean(centred * centred, axis=-1, keepdims=True) + eps)
    y = (centred * inv_std).reshape(x.shape)
    if scale.shape[0] == groups and groups != channels:
        scale = jnp.repeat(scale, channels // groups)
        bias = jnp.repeat(bias, channels // groups)
    return y * _per_channel(scale, x.ndim) + _per_channel(bias, x.ndim)


@register("LRN")
def lrn(call: NodeCall, x: Any) -> Any:
    """ONNX LRN: the channel window's sum of squares by ``lax.reduce_window``."""
    win = lrn_window(call)
    spatial = x.ndim - 2
    total = lax.reduce_window(
        x * x,
        jnp.asarray(0, dtype=x.dtype),
        lax.add,
        window_dimensions=(1, win.size, *([1] * spatial)),
        window_strides=(1,) * x.ndim,
        padding=((0, 0), (win.before, win.after), *([(0, 0)] * spatial)),
    )
    return x / jnp.power(win.bias + (win.alpha / win.size) * total, win.beta)


@register("MeanVarianceNormalization")
def mean_variance_norm(call: NodeCall, x: Any) -> Any:
    """ONNX MeanVarianceNormalization over ``axes`` (default N, H, W), as its function body:
    ``(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)``.
    """
    axes = tuple(int(a) % x.ndim for a in call.attr("axes", [0, 2, 3]))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    variance = jnp.mean(x * x, axis=axes, keepdims=True) - mean * mean
    return (x - mean) / (jnp.sqrt(variance) + jnp.asarray(1e-9, x.dtype))
