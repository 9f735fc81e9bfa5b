"""Transformer ONNX ops with paddle: Attention (opset 23+), RotaryEmbedding.

Attention is composed of ``paddle.matmul`` and ``F.softmax`` in the order ONNX's function
body gives (``sqrt(scale)`` on Q and on K, the additive bias of the causal, window and
padding masks, softcap, softmax, the product with V), as the torch translator is.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

from anpred.translate.registry import NodeCall, register

Tensor = Any


def _heads(x: Tensor, heads: int) -> Tensor:
    """(batch, sequence, heads * size) -> (batch, heads, sequence, size)."""
    return paddle.transpose(x.reshape([x.shape[0], x.shape[1], heads, -1]), [0, 2, 1, 3])


def _bias(allowed: Tensor, dtype: Any) -> Tensor:
    zero = paddle.zeros(allowed.shape, dtype)
    return paddle.where(allowed, zero, paddle.full(allowed.shape, -math.inf, dtype))


def _attention_bias(
    call: NodeCall, dtype: Any, q_len: int, kv_len: int, mask: Tensor, past_len: int | None,
    nonpad: Tensor,
) -> Tensor:  # fmt: skip
    if mask is not None and mask.shape[-1] < kv_len:
        is_bool = mask.dtype == paddle.bool
        extra = list(mask.shape[:-1]) + [kv_len - mask.shape[-1]]
        fill = paddle.zeros(extra, "bool") if is_bool else paddle.full(extra, -math.inf, mask.dtype)
        mask = paddle.concat([mask, fill], axis=-1)
    if mask is not None and mask.dtype == paddle.bool:
        mask = _bias(mask, dtype)
    bias = paddle.zeros([q_len, kv_len], dtype)
    if mask is not None:
        bias = bias + mask
    i = paddle.arange(q_len, dtype="int64").reshape([q_len, 1])
    j = paddle.arange(kv_len, dtype="int64").reshape([1, kv_len])
    if past_len is None and nonpad is not None:
        offset = paddle.cast(nonpad, "int64").reshape([-1, 1, 1, 1]) - q_len
        distance = (i + offset) - j
    else:
        distance = (i + (past_len or 0)) - j
    if call.attr("is_causal", 0):
        bias = bias + _bias(distance >= 0, dtype)
    left, right = int(call.attr("left_window_size", -1)), int(call.attr("right_window_size", -1))
    if left >= 0 or right >= 0:
        allowed = paddle.ones(distance.shape, "bool")
        if left >= 0:
            allowed = paddle.logical_and(allowed, distance <= left)
        if right >= 0:
            allowed = paddle.logical_and(allowed, -distance <= right)
        bias = bias + _bias(allowed, dtype)
    if nonpad is not None:
        keys = j < paddle.cast(nonpad, "int64").reshape([-1, 1])
        bias = bias + _bias(keys.reshape([-1, 1, 1, kv_len]), dtype)
    return bias


@register("paddle", "Attention", since=23)
def attention(
    call: NodeCall, q: Tensor, k: Tensor, v: Tensor, mask: Tensor = None,
    past_key: Tensor = None, past_value: Tensor = None, nonpad_kv_seqlen: Tensor = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:  # fmt: skip
    """ONNX Attention: 3-D or 4-D inputs, grouped-query heads, past cache, masks, softcap."""
    rank = q.ndim
    if rank == 3:
        q = _heads(q, int(call.attr("q_num_heads")))
        k = _heads(k, int(call.attr("kv_num_heads")))
        v = _heads(v, int(call.attr("kv_num_heads")))
    scale = call.attr("scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(np.float32(scale))
    root = math.sqrt(scale)
    if q.dtype != paddle.float64:
        root = float(np.float32(root))
    past_len = None if past_key is None else past_key.shape[2]
    if past_key is not None:
        k = paddle.concat([past_key, k], axis=2)
    if past_value is not None:
        v = paddle.concat([past_value, v], axis=2)
    present_key, present_value = k, v
    q_len, kv_len = q.shape[2], k.shape[2]
    bias = _attention_bias(call, q.dtype, q_len, kv_len, mask, past_len, nonpad_kv_seqlen)
    if q.shape[1] != k.shape[1] and q.shape[1] % k.shape[1] == 0:
        k = paddle.repeat_interleave(k, q.shape[1] // k.shape[1], axis=1)
        v = paddle.repeat_interleave(v, q.shape[1] // v.shape[1], axis=1)
    scores = paddle.matmul(q * root, k * root, transpose_y=True)
    softcap = call.attr("softcap")
    if softcap is not None and float(softcap) > 0:
        cap = float(np.float32(softcap))
        scores = paddle.tanh(scores / cap) * cap
    with_bias = scores + bias
    mode = int(call.attr("qk_matmul_output_mode", 0))
    exposed = with_bias if mode == 2 else scores
    probabilities = F.softmax(with_bias, axis=-1)
    masked_rows = paddle.isinf(paddle.max(bias, axis=-1, keepdim=True))
    probabilities = paddle.where(
        masked_rows.expand(probabilities.shape), paddle.zeros_like(probabilities), probabilities
    )
    if mode == 3:
        exposed = probabilities
    y = paddle.matmul(probabilities, v)
    if rank == 3:
        y = paddle.transpose(y, [0, 2, 1, 3]).reshape([y.shape[0], y.shape[2], -1])
    return y, present_key, present_value, exposed


@register("paddle", "RotaryEmbedding", since=23)
def rotary_embedding(
    call: NodeCall, x: Tensor, cos_cache: Tensor, sin_cache: Tensor, position_ids: Tensor = None
) -> Tensor:
    """ONNX RotaryEmbedding: rotate the first ``rotary_embedding_dim`` features per head."""
    shape = list(x.shape)
    if x.ndim == 4:
        x = paddle.transpose(x, [0, 2, 1, 3])
    else:
        x = x.reshape([shape[0], shape[1], int(call.attr("num_heads")), -1])
    dim = int(call.attr("rotary_embedding_dim", 0)) or x.shape[-1]
    rotate, keep = x[..., :dim], x[..., dim:]
    if position_ids is not None:
        cos_cache = paddle.gather(cos_cache, position_ids.reshape([-1])).reshape(
            [*position_ids.shape, cos_cache.shape[-1]]
        )
        sin_cache = paddle.gather(sin_cache, position_ids.reshape([-1])).reshape(
            [*position_ids.shape, sin_cache.shape[-1]]
        )
    cos, sin = cos_cache.unsqueeze(2), sin_cache.unsqueeze(2)
    interleaved = bool(call.attr("interleaved", 0))
    if interleaved:
        x1, x2 = rotate[..., 0::2], rotate[..., 1::2]
    else:
        x1, x2 = paddle.split(rotate, 2, axis=-1)
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        rotated = paddle.stack([real, imag], axis=-1).reshape(rotate.shape)
    else:
        rotated = paddle.concat([real, imag], axis=-1)
    y = paddle.concat([rotated, keep], axis=-1) if keep.shape[-1] else rotated
    return paddle.transpose(y, [0, 2, 1, 3]) if len(shape) == 4 else y.reshape(shape)
