"""Stateful sequence ops of recent LMs, in ONNX's layout: CausalConvWithState, LinearAttention.

CausalConvWithState is ``tf.nn.depthwise_conv2d`` over the past state followed by the
input (a 1-D convolution as a height-1 image); LinearAttention has no TensorFlow kernel
and is composed: a Python loop over the (static) sequence around ``tf.einsum``.
"""

from __future__ import annotations

import math

import numpy as np

from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import onnx_op
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.tensorflow.ops_attention import _heads


@onnx_op("CausalConvWithState", since=27)
def causal_conv_with_state(
    call: NodeCall,
    x: tf.Tensor,
    w: tf.Tensor,
    b: tf.Tensor | None = None,
    past_state: tf.Tensor | None = None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """ONNX CausalConvWithState: a depthwise 1-D convolution over ``past_state`` (zeros by
    default) followed by the input; ``silu``/``swish`` activation (``tf.nn.silu``); the last
    ``k - 1`` steps are the present state.
    """
    k = int(w.shape[2])
    if past_state is None:
        past_state = tf.zeros(tf.concat([tf.shape(x)[:2], [k - 1]], 0), x.dtype)
    padded = tf.concat([tf.cast(past_state, x.dtype), x], 2)  # (B, C, k - 1 + T)
    image = tf.transpose(padded, [0, 2, 1])[:, None]  # (B, 1, T', C)
    kernel = tf.transpose(w, [2, 0, 1])[None]  # (1, k, C, 1)
    y = tf.nn.depthwise_conv2d(image, kernel, [1, 1, 1, 1], "VALID")[:, 0]  # (B, T, C)
    if b is not None:
        y = y + b
    if call.attr("activation", "none") in ("silu", "swish"):
        y = tf.nn.silu(y)
    length = tf.shape(padded)[2]
    return tf.transpose(y, [0, 2, 1]), padded[:, :, length - (k - 1) :]


@onnx_op("LinearAttention", since=27)
def linear_attention(
    call: NodeCall,
    q: tf.Tensor,
    k: tf.Tensor,
    v: tf.Tensor,
    past_state: tf.Tensor | None = None,
    decay: tf.Tensor | None = None,
    beta: tf.Tensor | None = None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """ONNX LinearAttention: a recurrent state ``S`` (batch, kv heads, d_k, d_v) updated
    per step, ``linear`` / ``gated`` (``S * exp(decay)``) / ``delta`` / ``gated_delta``
    (``v`` replaced by ``beta * (v - S^T k)``), read as ``scale * q S``; grouped query
    heads read their key/value head's state (``tf.repeat``).
    """
    rule = call.attr("update_rule", "gated_delta")
    q_heads, kv_heads = int(call.attr("q_num_heads")), int(call.attr("kv_num_heads"))
    batch, steps = int(q.shape[0]), int(q.shape[1])
    q4, k4, v4 = _heads(q, q_heads), _heads(k, kv_heads), _heads(v, kv_heads)
    d_k, d_v = int(q4.shape[-1]), int(v4.shape[-1])
    if decay is not None:
        decay = (
            tf.transpose(tf.reshape(decay, [batch, steps, kv_heads, 1]), [0, 2, 1, 3])
            if int(decay.shape[-1]) == kv_heads
            else _heads(decay, kv_heads)
        )
    if beta is not None:
        beta = tf.transpose(tf.reshape(beta, [batch, steps, int(beta.shape[-1]), 1]), [0, 2, 1, 3])
    state = (
        tf.zeros([batch, kv_heads, d_k, d_v], q.dtype)
        if past_state is None
        else tf.cast(past_state, q.dtype)
    )
    scale = call.attr("scale")
    scale = 1.0 / math.sqrt(d_k) if not scale else float(np.float32(scale))
    group = q_heads // kv_heads
    outputs = []
    for t in range(steps):
        k_t, v_t = k4[:, :, t], v4[:, :, t]
        if rule in ("gated", "gated_delta"):
            state = state * tf.exp(decay[:, :, t])[..., None]  # type: ignore[index]
        if rule in ("delta", "gated_delta"):
            retrieved = tf.einsum("bhdm,bhd->bhm", state, k_t)
            v_t = beta[:, :, t] * (v_t - retrieved)  # type: ignore[index]
        state = state + k_t[..., None] * v_t[..., None, :]
        read = state if group == 1 else tf.repeat(state, group, axis=1)
        outputs.append(tf.einsum("bhd,bhdm->bhm", q4[:, :, t], read) * scale)
    y = tf.reshape(tf.transpose(tf.stack(outputs, 2), [0, 2, 1, 3]), [batch, steps, -1])
    present = state if past_state is None else tf.cast(state, past_state.dtype)
    return y, present
