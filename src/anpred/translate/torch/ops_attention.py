"""Transformer torch translators: Attention (opset 23+), RotaryEmbedding, LinearAttention.

Attention is composed of torch's matmul and softmax kernels in the order ONNX's function
body gives (``sqrt(scale)`` on Q and on K, the additive bias of the causal, window and
padding masks, softcap, softmax, the product with V), not ``F.scaled_dot_product_attention``,
whose CPU kernels choose their own scaling order and cannot return the optional
``qk_matmul_output``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from anpred.translate.registry import NodeCall, register
from anpred.translate.torch.adapter import run_float
from anpred.translate.torch.ops_elementwise import ONNX_TO_TORCH

_LIB = "torch"

Tensor = torch.Tensor

_INF = math.inf


def _heads(x: Tensor, heads: int) -> Tensor:
    """(batch, sequence, heads * size) -> (batch, heads, sequence, size)."""
    return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)


def _frontier(q_len: int, kv_len: int, offset: Tensor | int) -> Tensor:
    """``i + offset - j`` for query ``i`` and key ``j``: (q, kv), or (batch, 1, q, kv)."""
    i = torch.arange(q_len).reshape(q_len, 1)
    j = torch.arange(kv_len).reshape(1, kv_len)
    if isinstance(offset, Tensor):
        return (i + offset.reshape(-1, 1, 1, 1)) - j
    return (i + offset) - j


def _bias(allowed: Tensor, like: Tensor) -> Tensor:
    """0 where allowed, -inf elsewhere, in ``like``'s dtype."""
    zero = torch.zeros((), dtype=like.dtype)
    return torch.where(allowed, zero, torch.full((), -_INF, dtype=like.dtype))


def _attention_bias(
    call: NodeCall,
    q: Tensor,
    q_len: int,
    kv_len: int,
    mask: Tensor | None,
    past_len: int | None,
    nonpad: Tensor | None,
) -> Tensor:
    """The additive bias of the attention mask, causal mask, window and key padding."""
    if mask is not None and mask.shape[-1] < kv_len:
        fill = False if mask.dtype == torch.bool else -_INF
        pad = [0, kv_len - mask.shape[-1]]
        mask = torch.nn.functional.pad(mask, pad, value=fill)
    if mask is not None and mask.dtype == torch.bool:
        mask = _bias(mask, q)
    bias = torch.zeros((q_len, kv_len), dtype=q.dtype)
    if mask is not None:
        bias = bias + mask
    offset: Tensor | int
    if past_len is None and nonpad is not None:
        offset = nonpad.to(torch.int64).reshape(-1) - q_len
    else:
        offset = past_len or 0
    distance = _frontier(q_len, kv_len, offset)
    if call.attr("is_causal", 0):
        bias = bias + _bias(distance >= 0, q)
    left, right = int(call.attr("left_window_size", -1)), int(call.attr("right_window_size", -1))
    if left >= 0 or right >= 0:
        allowed = torch.ones_like(distance, dtype=torch.bool)
        if left >= 0:
            allowed &= distance <= left
        if right >= 0:
            allowed &= -distance <= right
        bias = bias + _bias(allowed, q)
    if nonpad is not None:
        keys = torch.arange(kv_len).reshape(1, kv_len) < nonpad.to(torch.int64).reshape(-1, 1)
        bias = bias + _bias(keys.reshape(-1, 1, 1, kv_len), q)
    return bias


@register(_LIB, "Attention", since=23)
def attention(
    call: NodeCall,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    past_key: Tensor | None = None,
    past_value: Tensor | None = None,
    nonpad_kv_seqlen: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """ONNX Attention: 3-D (with ``q_num_heads``/``kv_num_heads``) or 4-D inputs.

    Grouped-query attention repeats each K/V head over its query heads; a past key/value
    cache is concatenated in front (and returned as the present cache); ``is_causal`` is
    bottom-right aligned to the cache; a query row with no allowed key gives 0.
    ``qk_matmul_output_mode`` 0/1 returns the (softcapped) scores, 2 the scores with the
    bias, 3 the probabilities.
    """
    rank = q.ndim
    if rank == 3:
        q = _heads(q, int(call.attr("q_num_heads")))
        k = _heads(k, int(call.attr("kv_num_heads")))
        v = _heads(v, int(call.attr("kv_num_heads")))
    scale = call.attr("scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(np.float32(scale))
    root = math.sqrt(scale)
    if q.dtype != torch.float64:  # the function body casts sqrt(scale) to the input type
        root = float(np.float32(root))
    past_len = None if past_key is None else past_key.shape[2]
    if past_key is not None:
        k = torch.cat([past_key, k], dim=2)
    if past_value is not None:
        v = torch.cat([past_value, v], dim=2)
    present_key, present_value = k, v
    q_len, kv_len = q.shape[2], k.shape[2]
    bias = _attention_bias(call, q, q_len, kv_len, mask, past_len, nonpad_kv_seqlen)
    if q.shape[1] != k.shape[1] and q.shape[1] % k.shape[1] == 0:
        k = torch.repeat_interleave(k, q.shape[1] // k.shape[1], dim=1)
        v = torch.repeat_interleave(v, q.shape[1] // v.shape[1], dim=1)
    scores = torch.matmul(q * root, (k * root).transpose(-1, -2))
    softcap = call.attr("softcap")
    if softcap is not None and float(softcap) > 0:
        cap = float(np.float32(softcap))
        scores = torch.tanh(scores / cap) * cap
    with_bias = scores + bias
    mode = int(call.attr("qk_matmul_output_mode", 0))
    exposed = with_bias if mode == 2 else scores
    precision = call.attr("softmax_precision")
    logits = with_bias
    if precision is not None:
        logits = logits.to(run_float(ONNX_TO_TORCH[int(precision)]))
    probabilities = torch.softmax(logits, dim=-1)
    masked_rows = torch.isneginf(torch.amax(bias, dim=-1, keepdim=True))
    probabilities = torch.where(masked_rows, torch.zeros((), dtype=logits.dtype), probabilities)
    if mode == 3:
        exposed = probabilities
    y = torch.matmul(probabilities.to(q.dtype), v)
    if rank == 3:
        y = y.transpose(1, 2).reshape(y.shape[0], y.shape[2], -1)
    return y, present_key, present_value, exposed.to(q.dtype)


@register(_LIB, "RotaryEmbedding", since=23)
def rotary_embedding(
    call: NodeCall,
    x: Tensor,
    cos_cache: Tensor,
    sin_cache: Tensor,
    position_ids: Tensor | None = None,
) -> Tensor:
    """ONNX RotaryEmbedding: rotate the first ``rotary_embedding_dim`` features of each head.

    4-D input (batch, heads, sequence, size) or 3-D (batch, sequence, heads * size, with
    ``num_heads``); halves (default) or ``interleaved`` pairs; caches indexed by
    ``position_ids`` when given, else already (batch, sequence, dim / 2).
    """
    shape = x.shape
    if x.ndim == 4:
        x = x.transpose(1, 2)  # (batch, sequence, heads, size)
    else:
        x = x.reshape(shape[0], shape[1], int(call.attr("num_heads")), -1)
    dim = int(call.attr("rotary_embedding_dim", 0)) or x.shape[-1]
    rotate, keep = x[..., :dim], x[..., dim:]
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    cos, sin = cos_cache.unsqueeze(2), sin_cache.unsqueeze(2)
    interleaved = bool(call.attr("interleaved", 0))
    if interleaved:
        x1, x2 = rotate[..., 0::2], rotate[..., 1::2]
    else:
        x1, x2 = torch.chunk(rotate, 2, dim=-1)
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if interleaved:
        rotated = torch.stack([real, imag], dim=-1).reshape(rotate.shape)
    else:
        rotated = torch.cat([real, imag], dim=-1)
    y = torch.cat([rotated, keep], dim=-1)
    if len(shape) == 4:
        return y.transpose(1, 2)
    return y.reshape(shape)


@register(_LIB, "LinearAttention")
def linear_attention(
    call: NodeCall,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    past_state: Tensor | None = None,
    decay: Tensor | None = None,
    beta: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """ONNX LinearAttention: a recurrent state ``S`` (batch, kv heads, d_k, d_v) updated
    per step, ``linear`` / ``gated`` (``S * exp(decay)``) / ``delta`` / ``gated_delta``
    (``v`` replaced by ``beta * (v - S^T k)``), read as ``scale * q S``.

    A Python loop over the sequence around ``torch.einsum``; grouped query heads read
    their key/value head's state (``repeat_interleave``).
    """
    rule = call.attr("update_rule", "gated_delta")
    q_heads, kv_heads = int(call.attr("q_num_heads")), int(call.attr("kv_num_heads"))
    batch, steps, _ = q.shape
    q4, k4, v4 = _heads(q, q_heads), _heads(k, kv_heads), _heads(v, kv_heads)
    d_k, d_v = q4.shape[-1], v4.shape[-1]
    if decay is not None:
        decay = (
            decay.reshape(batch, steps, kv_heads, 1).transpose(1, 2)
            if decay.shape[-1] == kv_heads
            else _heads(decay, kv_heads)
        )
    if beta is not None:
        beta = beta.reshape(batch, steps, beta.shape[-1], 1).transpose(1, 2)
    state = (
        q.new_zeros((batch, kv_heads, d_k, d_v)) if past_state is None else past_state.to(q.dtype)
    )
    scale = call.attr("scale")
    scale = 1.0 / math.sqrt(d_k) if not scale else float(np.float32(scale))
    group = q_heads // kv_heads
    outputs = []
    for t in range(steps):
        k_t, v_t = k4[:, :, t], v4[:, :, t]
        if rule in ("gated", "gated_delta"):
            state = state * torch.exp(decay[:, :, t]).unsqueeze(-1)  # type: ignore[index]
        if rule in ("delta", "gated_delta"):
            retrieved = torch.einsum("bhdm,bhd->bhm", state, k_t)
            v_t = beta[:, :, t] * (v_t - retrieved)  # type: ignore[index]
        state = state + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)
        read = state if group == 1 else torch.repeat_interleave(state, group, dim=1)
        outputs.append(torch.einsum("bhd,bhdm->bhm", q4[:, :, t], read) * scale)
    y = torch.stack(outputs, dim=2).transpose(1, 2).reshape(batch, steps, q_heads * d_v)
    present = state if past_state is None else state.to(past_state.dtype)
    return y, present
