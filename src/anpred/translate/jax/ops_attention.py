"""Transformer ONNX ops with ``jax.numpy`` / ``jax.nn``: Attention (opset 23+), RotaryEmbedding.

Attention is composed in the order ONNX's function body gives (``sqrt(scale)`` on Q and
on K, the additive bias of the causal, window and padding masks, softcap, softmax, the
product with V), as the torch translator is; under ``jax.jit`` every mask is built from
static shapes and traced values.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from anpred.translate.jax.registration import register
from anpred.translate.registry import NodeCall


def _heads(x: Any, heads: int) -> Any:
    """(batch, sequence, heads * size) -> (batch, heads, sequence, size)."""
    return jnp.swapaxes(x.reshape(x.shape[0], x.shape[1], heads, -1), 1, 2)


def _bias(allowed: Any, dtype: Any) -> Any:
    return jnp.where(allowed, jnp.zeros((), dtype), jnp.full((), -jnp.inf, dtype))


def _attention_bias(
    call: NodeCall, dtype: Any, q_len: int, kv_len: int, mask: Any, past_len: int | None,
    nonpad: Any,
) -> Any:  # fmt: skip
    if mask is not None and mask.shape[-1] < kv_len:
        fill = False if mask.dtype == jnp.bool_ else -jnp.inf
        width = [(0, 0)] * (mask.ndim - 1) + [(0, kv_len - mask.shape[-1])]
        mask = jnp.pad(mask, width, constant_values=fill)
    if mask is not None and mask.dtype == jnp.bool_:
        mask = _bias(mask, dtype)
    bias = jnp.zeros((q_len, kv_len), dtype)
    if mask is not None:
        bias = bias + mask
    i = jnp.arange(q_len).reshape(q_len, 1)
    j = jnp.arange(kv_len).reshape(1, kv_len)
    if past_len is None and nonpad is not None:
        offset = nonpad.astype(jnp.int32).reshape(-1, 1, 1, 1) - q_len
        distance = (i + offset) - j
    else:
        distance = (i + (past_len or 0)) - j
    if call.attr("is_causal", 0):
        bias = bias + _bias(distance >= 0, dtype)
    left, right = int(call.attr("left_window_size", -1)), int(call.attr("right_window_size", -1))
    if left >= 0 or right >= 0:
        allowed = jnp.ones(distance.shape, bool)
        if left >= 0:
            allowed = allowed & (distance <= left)
        if right >= 0:
            allowed = allowed & (-distance <= right)
        bias = bias + _bias(allowed, dtype)
    if nonpad is not None:
        keys = j < nonpad.astype(jnp.int32).reshape(-1, 1)
        bias = bias + _bias(keys.reshape(-1, 1, 1, kv_len), dtype)
    return bias


@register("Attention", since=23)
def attention(
    call: NodeCall, q: Any, k: Any, v: Any, mask: Any = None, past_key: Any = None,
    past_value: Any = None, nonpad_kv_seqlen: Any = None,
) -> tuple[Any, Any, Any, Any]:  # fmt: skip
    """ONNX Attention: 3-D or 4-D inputs, grouped-query heads, past cache, masks, softcap.

    ``qk_matmul_output_mode`` 0/1 returns the (softcapped) scores, 2 the scores with the
    bias, 3 the probabilities; a query row with no allowed key gives 0.
    """
    rank = q.ndim
    if rank == 3:
        q = _heads(q, int(call.attr("q_num_heads")))
        k = _heads(k, int(call.attr("kv_num_heads")))
        v = _heads(v, int(call.attr("kv_num_heads")))
    scale = call.attr("scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(np.float32(scale))
    root = math.sqrt(scale)
    if q.dtype != jnp.float64:
        root = float(np.float32(root))
    past_len = None if past_key is None else past_key.shape[2]
    if past_key is not None:
        k = jnp.concatenate([past_key, k], axis=2)
    if past_value is not None:
        v = jnp.concatenate([past_value, v], axis=2)
    present_key, present_value = k, v
    q_len, kv_len = q.shape[2], k.shape[2]
    bias = _attention_bias(call, q.dtype, q_len, kv_len, mask, past_len, nonpad_kv_seqlen)
    if q.shape[1] != k.shape[1] and q.shape[1] % k.shape[1] == 0:
        k = jnp.repeat(k, q.shape[1] // k.shape[1], axis=1)
        v = jnp.repeat(v, q.shape[1] // v.shape[1], axis=1)
    scores = jnp.matmul(q * root, jnp.swapaxes(k * root, -1, -2))
    softcap = call.attr("softcap")
    if softcap is not None and float(softcap) > 0:
        cap = float(np.float32(softcap))
        scores = jnp.tanh(scores / cap) * cap
    with_bias = scores + bias
    mode = int(call.attr("qk_matmul_output_mode", 0))
    exposed = with_bias if mode == 2 else scores
    probabilities = jax.nn.softmax(with_bias, axis=-1)
    masked_rows = jnp.isneginf(jnp.max(bias, axis=-1, keepdims=True))
    probabilities = jnp.where(masked_rows, jnp.zeros((), with_bias.dtype), probabilities)
    if mode == 3:
        exposed = probabilities
    y = jnp.matmul(probabilities.astype(q.dtype), v)
    if rank == 3:
        y = jnp.swapaxes(y, 1, 2).reshape(y.shape[0], y.shape[2], -1)
    return y, present_key, present_value, exposed.astype(q.dtype)


@register("RotaryEmbedding", since=23)
def rotary_embedding(
    call: NodeCall, x: Any, cos_cache: Any, sin_cache: Any, position_ids: Any = None
) -> Any:
    """ONNX RotaryEmbedding: rotate the first ``rotary_embedding_dim`` features per head."""
    shape = x.shape
    if x.ndim == 4:
        x = jnp.swapaxes(x, 1, 2)
    else:
        x = x.reshape(shape[0], shape[1], int(call.attr("num_heads")), -1)
    dim = int(call.attr("rotary_embedding_dim", 0)) or x.shape[-1]
    rotate, keep = x[..., :dim], x[..., dim:]
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    cos, sin = cos_cache[:, :, None, :], sin_cache[:, :, None, :]
    interleaved = bool(call.attr("interleaved", 0))
    if interleaved:
        x1, x2 = rotate[..., 0::2], rotate[..., 1::2]
    else:
        x1, x2 = jnp.split(rotate, 2, axis=-1)
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        rotated = jnp.stack([real, imag], axis=-1).reshape(rotate.shape)
    else:
        rotated = jnp.concatenate([real, imag], axis=-1)
    y = jnp.concatenate([rotated, keep], axis=-1)
    return jnp.swapaxes(y, 1, 2) if len(shape) == 4 else y.reshape(shape)
