"""Ops of transformer and audio graphs with paddle kernels: RMS/Lp normalisation, Hardmax,
GatherElements, TopK.

RMSNormalization is composed (``paddle.rsqrt`` of the mean square): paddle's fused
``rms_norm`` kernels are GPU-oriented incubate APIs. Float attributes are float32 values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

from anpred.translate.registry import NodeCall, register

Tensor = Any


@register("paddle", "RMSNormalization", since=23)
def rms_norm(call: NodeCall, x: Tensor, scale: Tensor) -> Tensor:
    """ONNX RMSNormalization over the axes from ``axis`` (default -1) on."""
    axis = int(call.attr("axis", -1)) % x.ndim
    eps = float(np.float32(call.attr("epsilon", 1e-5)))
    square = paddle.mean(paddle.square(x), axis=list(range(axis, x.ndim)), keepdim=True)
    return x * paddle.rsqrt(square + eps) * scale


@register("paddle", "LpNormalization")
def lp_norm(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX LpNormalization: ``x / ||x||_p`` along ``axis`` (``paddle.linalg.norm``); a zero
    norm gives 0.
    """
    axis = int(call.attr("axis", -1)) % x.ndim
    norm = paddle.linalg.norm(x, p=float(call.attr("p", 2)), axis=axis, keepdim=True)
    return paddle.where(norm == 0, paddle.zeros_like(x), x / norm)


@register("paddle", "Hardmax", since=13)
def hardmax(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Hardmax: 1 at the first maximum along ``axis`` (``F.one_hot`` of ``argmax``)."""
    axis = int(call.attr("axis", -1)) % x.ndim
    hot = F.one_hot(paddle.argmax(x, axis=axis), x.shape[axis])
    return paddle.moveaxis(paddle.cast(hot, x.dtype), -1, axis)


@register("paddle", "GatherElements")
def gather_elements(call: NodeCall, x: Tensor, indices: Tensor) -> Tensor:
    """ONNX GatherElements: ``paddle.take_along_axis``."""
    axis = int(call.attr("axis", 0)) % x.ndim
    indices = paddle.cast(indices, "int64")
    indices = paddle.where(indices < 0, indices + x.shape[axis], indices)
    return paddle.take_along_axis(x, indices, axis=axis, broadcast=False)


@register("paddle", "TopK", since=10)
def top_k(call: NodeCall, x: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
    """ONNX TopK: ``paddle.topk`` (``largest``, ``axis``; sorted)."""
    static = call.const(1)
    count = int(np.asarray(static).reshape(-1)[0]) if static is not None else int(k.item())
    axis = int(call.attr("axis", -1)) % x.ndim
    values, indices = paddle.topk(x, count, axis=axis, largest=bool(call.attr("largest", 1)))
    return values, paddle.cast(indices, "int64")
