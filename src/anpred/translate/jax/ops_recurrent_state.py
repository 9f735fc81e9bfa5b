"""Stateful sequence jax translators (opset 27): LinearAttention, CausalConvWithState.

jax has no kernel for either. LinearAttention is a Python loop over the (static) sequence
around ``jnp.einsum``, as ONNX's function body runs it; CausalConvWithState is a depthwise
``lax.conv_general_dilated`` over the past state followed by the input.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from anpred.translate.jax.numerics import current
from anpred.translate.jax.ops_attention import _heads
from anpred.translate.jax.registration import register
from anpred.translate.registry import NodeCall


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@register("LinearAttention")
def linear_attention(
    call: NodeCall,
    q: Any,
    k: Any,
    v: Any,
    past_state: Any = None,
    decay: Any = None,
    beta: Any = None,
) -> tuple[Any, Any]:
    """ONNX LinearAttention: a recurrent state ``S`` (batch, kv heads, d_k, d_v) updated
    per step, ``linear`` / ``gated`` (``S * exp(decay)``) / ``delta`` / ``gated_delta``
    (``v`` replaced by ``beta * (v - S^T k)``), read as ``scale * q S``; grouped query
    heads read their key/value head's state (``jnp.repeat``).
    """
    rule = _text(call.attr("update_rule", "gated_delta"))
    q_heads, kv_heads = int(call.attr("q_num_heads")), int(call.attr("kv_num_heads"))
    batch, steps, _ = q.shape
    q4, k4, v4 = _heads(q, q_heads), _heads(k, kv_heads), _heads(v, kv_heads)
    d_k, d_v = q4.shape[-1], v4.shape[-1]
    if decay is not None:
        if decay.shape[-1] == kv_heads:
            decay = jnp.swapaxes(decay.reshape(batch, steps, kv_heads, 1), 1, 2)
        else:
            decay = _heads(decay, kv_heads)
    if beta is not None:
        beta = jnp.swapaxes(beta.reshape(batch, steps, beta.shape[-1], 1), 1, 2)
    if past_state is None:
        state = jnp.zeros((batch, kv_heads, d_k, d_v), q.dtype)
    else:
        state = past_state.astype(q.dtype)
    scale = call.attr("scale")
    scale = 1.0 / math.sqrt(d_k) if not scale else float(np.float32(scale))
    group = q_heads // kv_heads
    precision = current().precision
    outputs = []
    for t in range(steps):
        k_t, v_t = k4[:, :, t], v4[:, :, t]
        if rule in ("gated", "gated_delta"):
            state = state * jnp.exp(decay[:, :, t])[..., None]
        if rule in ("delta", "gated_delta"):
            retrieved = jnp.einsum("bhdm,bhd->bhm", state, k_t, precision=precision)
            v_t = beta[:, :, t] * (v_t - retrieved)
        state = state + k_t[..., None] * v_t[..., None, :]
        read = state if group == 1 else jnp.repeat(state, group, axis=1)
        outputs.append(jnp.einsum("bhd,bhdm->bhm", q4[:, :, t], read, precision=precision) * scale)
    y = jnp.swapaxes(jnp.stack(outputs, axis=2), 1, 2).reshape(batch, steps, q_heads * d_v)
    present = state if past_state is None else state.astype(past_state.dtype)
    return y, present


@register("CausalConvWithState")
def causal_conv_with_state(
    call: NodeCall, x: Any, w: Any, b: Any = None, past_state: Any = None
) -> tuple[Any, Any]:
    """ONNX CausalConvWithState: a depthwise 1-D convolution over ``past_state`` (zeros by
    default) followed by the input; ``silu``/``swish`` activation (``jax.nn.silu``); the
    last ``k - 1`` steps are the present state.
    """
    batch, channels, _ = x.shape
    k = w.shape[2]
    if past_state is None:
        past_state = jnp.zeros((batch, channels, k - 1), x.dtype)
    padded = jnp.concatenate([past_state.astype(x.dtype), x], axis=2)
    y = lax.conv_general_dilated(
        padded,
        w,
        window_strides=(1,),
        padding=((0, 0),),
        dimension_numbers=("NCH", "OIH", "NCH"),
        feature_group_count=channels,
        precision=current().precision,
    )
    if b is not None:
        y = y + b.reshape(1, -1, 1)
    if _text(call.attr("activation", "none")) in ("silu", "swish"):
        y = jax.nn.silu(y)
    return y, padded[:, :, padded.shape[2] - (k - 1) :]
