"""ONNX LinearAttention (opset 27) in paddle: a recurrent state updated per step.

Paddle has no kernel for it: a Python loop over the sequence around ``paddle.einsum``,
``paddle.exp`` and element-wise ops (as ONNX's function body, a Scan, orders them).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import paddle

from anpred.translate.registry import NodeCall, register

Tensor = Any


def _heads(x: Tensor, heads: int) -> Tensor:
    """(batch, sequence, heads * size) -> (batch, heads, sequence, size)."""
    return paddle.transpose(paddle.reshape(x, [x.shape[0], x.shape[1], heads, -1]), [0, 2, 1, 3])


@register("paddle", "LinearAttention")
def linear_attention(
    call: NodeCall,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    past_state: Tensor = None,
    decay: Tensor = None,
    beta: Tensor = None,
) -> tuple[Tensor, Tensor]:
    """ONNX LinearAttention: a recurrent state ``S`` (batch, kv heads, d_k, d_v) updated
    per step, ``linear`` / ``gated`` (``S * exp(decay)``) / ``delta`` / ``gated_delta``
    (``v`` replaced by ``beta * (v - S^T k)``), read as ``scale * q S``.

    Composed (no paddle kernel): a Python loop over the sequence around ``paddle.einsum``;
    grouped query heads read their key/value head's state (``paddle.repeat_interleave``).
    """
    rule = call.attr("update_rule", "gated_delta")
    q_heads, kv_heads = int(call.attr("q_num_heads")), int(call.attr("kv_num_heads"))
    batch, steps = int(q.shape[0]), int(q.shape[1])
    q4, k4, v4 = _heads(q, q_heads), _heads(k, kv_heads), _heads(v, kv_heads)
    d_k, d_v = int(q4.shape[-1]), int(v4.shape[-1])
    if decay is not None:
        if int(decay.shape[-1]) == kv_heads:
            decay = paddle.transpose(
                paddle.reshape(decay, [batch, steps, kv_heads, 1]), [0, 2, 1, 3]
            )
        else:
            decay = _heads(decay, kv_heads)
    if beta is not None:
        beta = paddle.reshape(beta, [batch, steps, int(beta.shape[-1]), 1])
        beta = paddle.transpose(beta, [0, 2, 1, 3])
    if past_state is None:
        state = paddle.zeros([batch, kv_heads, d_k, d_v], dtype=q.dtype)
    else:
        state = paddle.cast(past_state, q.dtype)
    scale = call.attr("scale")
    scale = 1.0 / math.sqrt(d_k) if not scale else float(np.float32(scale))
    group = q_heads // kv_heads
    outputs = []
    for t in range(steps):
        k_t, v_t = k4[:, :, t], v4[:, :, t]
        if rule in ("gated", "gated_delta"):
            state = state * paddle.unsqueeze(paddle.exp(decay[:, :, t]), -1)
        if rule in ("delta", "gated_delta"):
            retrieved = paddle.einsum("bhdm,bhd->bhm", state, k_t)
            v_t = beta[:, :, t] * (v_t - retrieved)
        state = state + paddle.unsqueeze(k_t, -1) * paddle.unsqueeze(v_t, -2)
        read = state if group == 1 else paddle.repeat_interleave(state, group, axis=1)
        outputs.append(paddle.einsum("bhd,bhdm->bhm", q4[:, :, t], read) * scale)
    y = paddle.transpose(paddle.stack(outputs, axis=2), [0, 2, 1, 3])
    y = paddle.reshape(y, [batch, steps, q_heads * d_v])
    present = state if past_state is None else paddle.cast(state, past_state.dtype)
    return y, present
