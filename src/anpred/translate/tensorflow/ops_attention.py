"""Transformer ops in ONNX's layout with ``tf.linalg`` / ``tf.nn``: Attention (opset 23+),
RotaryEmbedding.

Attention is composed of ``tf.linalg.matmul`` and ``tf.nn.softmax`` in the order ONNX's
function body gives (``sqrt(scale)`` on Q and on K, the additive bias of the causal,
window and padding masks, softcap, softmax, the product with V), as the torch
translator is.
"""

from __future__ import annotations

import math

import numpy as np

from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import onnx_op
from anpred.translate.tensorflow.lean_import import tf


def _heads(x: tf.Tensor, heads: int) -> tf.Tensor:
    """(batch, sequence, heads * size) -> (batch, heads, sequence, size)."""
    return tf.transpose(tf.reshape(x, [x.shape[0], x.shape[1], heads, -1]), [0, 2, 1, 3])


def _bias(allowed: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    return tf.where(allowed, tf.zeros((), dtype), tf.fill((), tf.constant(-math.inf, dtype)))


def _attention_bias(
    call: NodeCall, dtype: tf.DType, q_len: int, kv_len: int, mask: tf.Tensor | None,
    past_len: int | None, nonpad: tf.Tensor | None,
) -> tf.Tensor:  # fmt: skip
    if mask is not None and mask.shape[-1] < kv_len:
        fill = False if mask.dtype == tf.bool else -math.inf
        width = [[0, 0]] * (mask.shape.rank - 1) + [[0, kv_len - mask.shape[-1]]]
        mask = tf.pad(mask, width, constant_values=fill)
    if mask is not None and mask.dtype == tf.bool:
        mask = _bias(mask, dtype)
    bias = tf.zeros((q_len, kv_len), dtype)
    if mask is not None:
        bias = bias + mask
    i = tf.reshape(tf.range(q_len, dtype=tf.int64), (q_len, 1))
    j = tf.reshape(tf.range(kv_len, dtype=tf.int64), (1, kv_len))
    if past_len is None and nonpad is not None:
        offset = tf.reshape(tf.cast(nonpad, tf.int64), (-1, 1, 1, 1)) - q_len
        distance = (i + offset) - j
    else:
        distance = (i + (past_len or 0)) - j
    if call.attr("is_causal", 0):
        bias = bias + _bias(distance >= 0, dtype)
    left, right = int(call.attr("left_window_size", -1)), int(call.attr("right_window_size", -1))
    if left >= 0 or right >= 0:
        allowed = tf.ones_like(distance, dtype=tf.bool)
        if left >= 0:
            allowed = tf.logical_and(allowed, distance <= left)
        if right >= 0:
            allowed = tf.logical_and(allowed, -distance <= right)
        bias = bias + _bias(allowed, dtype)
    if nonpad is not None:
        keys = j < tf.reshape(tf.cast(nonpad, tf.int64), (-1, 1))
        bias = bias + _bias(tf.reshape(keys, (-1, 1, 1, kv_len)), dtype)
    return bias


@onnx_op("Attention", since=23)
def attention(
    call: NodeCall, q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, mask: tf.Tensor | None = None,
    past_key: tf.Tensor | None = None, past_value: tf.Tensor | None = None,
    nonpad_kv_seqlen: tf.Tensor | None = None,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:  # fmt: skip
    """ONNX Attention: 3-D or 4-D inputs, grouped-query heads, past cache, masks, softcap."""
    rank = q.shape.rank
    if rank == 3:
        q = _heads(q, int(call.attr("q_num_heads")))
        k = _heads(k, int(call.attr("kv_num_heads")))
        v = _heads(v, int(call.attr("kv_num_heads")))
    scale = call.attr("scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(np.float32(scale))
    root = math.sqrt(scale)
    if q.dtype != tf.float64:
        root = float(np.float32(root))
    past_len = None if past_key is None else past_key.shape[2]
    if past_key is not None:
        k = tf.concat([past_key, k], axis=2)
    if past_value is not None:
        v = tf.concat([past_value, v], axis=2)
    present_key, present_value = k, v
    q_len, kv_len = q.shape[2], k.shape[2]
    bias = _attention_bias(call, q.dtype, q_len, kv_len, mask, past_len, nonpad_kv_seqlen)
    if q.shape[1] != k.shape[1] and q.shape[1] % k.shape[1] == 0:
        k = tf.repeat(k, q.shape[1] // k.shape[1], axis=1)
        v = tf.repeat(v, q.shape[1] // v.shape[1], axis=1)
    scores = tf.linalg.matmul(q * root, k * root, transpose_b=True)
    softcap = call.attr("softcap")
    if softcap is not None and float(softcap) > 0:
        cap = float(np.float32(softcap))
        scores = tf.math.tanh(scores / cap) * cap
    with_bias = scores + bias
    mode = int(call.attr("qk_matmul_output_mode", 0))
    exposed = with_bias if mode == 2 else scores
    probabilities = tf.nn.softmax(with_bias, axis=-1)
    masked_rows = tf.math.is_inf(tf.reduce_max(bias, axis=-1, keepdims=True))
    probabilities = tf.where(masked_rows, tf.zeros((), probabilities.dtype), probabilities)
    if mode == 3:
        exposed = probabilities
    y = tf.linalg.matmul(probabilities, v)
    if rank == 3:
        y = tf.reshape(tf.transpose(y, [0, 2, 1, 3]), [y.shape[0], y.shape[2], -1])
    return y, present_key, present_value, exposed


@onnx_op("RotaryEmbedding", since=23)
def rotary_embedding(
    call: NodeCall, x: tf.Tensor, cos_cache: tf.Tensor, sin_cache: tf.Tensor,
    position_ids: tf.Tensor | None = None,
) -> tf.Tensor:  # fmt: skip
    """ONNX RotaryEmbedding: rotate the first ``rotary_embedding_dim`` features per head."""
    shape = x.shape.as_list()
    if len(shape) == 4:
        x = tf.transpose(x, [0, 2, 1, 3])
    else:
        x = tf.reshape(x, [shape[0], shape[1], int(call.attr("num_heads")), -1])
    dim = int(call.attr("rotary_embedding_dim", 0)) or x.shape[-1]
    rotate, keep = x[..., :dim], x[..., dim:]
    if position_ids is not None:
        cos_cache, sin_cache = (
            tf.gather(cos_cache, position_ids),
            tf.gather(sin_cache, position_ids),
        )
    cos, sin = cos_cache[:, :, None, :], sin_cache[:, :, None, :]
    interleaved = bool(call.attr("interleaved", 0))
    if interleaved:
        x1, x2 = rotate[..., 0::2], rotate[..., 1::2]
    else:
        x1, x2 = tf.split(rotate, 2, axis=-1)
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        rotated = tf.reshape(tf.stack([real, imag], axis=-1), tf.shape(rotate))
    else:
        rotated = tf.concat([real, imag], axis=-1)
    y = tf.concat([rotated, keep], axis=-1)
    return tf.transpose(y, [0, 2, 1, 3]) if len(shape) == 4 else tf.reshape(y, shape)
