"""Ops of transformer and audio graphs with paddle kernels: RMS/Lp/instance/group
normalisation, Hardmax, GatherElements, GatherND, TopK, GridSample, the NLL and softmax
cross-entropy losses, ScatterElements.

RMSNormalization is composed (``paddle.rsqrt`` of the mean square): paddle's fused
``rms_norm`` kernels are GPU-oriented incubate APIs. Float attributes are float32 values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

from anpred.translate.paddle.grid_cubic import grid_sample_cubic
from anpred.translate.registry import NodeCall, register

Tensor = Any


@register("paddle", "RMSNormalization", since=23)
def rms_norm(call: NodeCall, x: Tensor, scale: Tensor) -> Tensor:
    """ONNX RMSNormalization over the axes from ``axis`` (default -1) on."""
    axis = int(call.attr("axis", -1)) % x.ndim
    eps = float(np.float32(call.attr("epsilon", 1e-5)))
    square = paddle.mean(paddle.square(x), axis=list(range(axis, x.ndim)), keepdim=True)
    return x * paddle.rsqrt(square + eps) * scale


@register("paddle", "InstanceNormalization")
def instance_norm(call: NodeCall, x: Tensor, scale: Tensor, bias: Tensor) -> Tensor:
    """ONNX InstanceNormalization: per sample and channel over the spatial axes;
    ``F.instance_norm`` (the legacy torch exporter writes wav2vec2's GroupNorm with one
    channel per group as this op).
    """
    eps = float(np.float32(call.attr("epsilon", 1e-5)))
    return F.instance_norm(x, weight=scale, bias=bias, eps=eps)


@register("paddle", "GroupNormalization")
def group_norm(call: NodeCall, x: Tensor, scale: Tensor, bias: Tensor) -> Tensor:
    """ONNX GroupNormalization: ``num_groups`` groups of channels; ``F.group_norm`` (NCHW
    layouts of any rank).

    Opset 21 gives scale and bias per channel; opset 18 gave them per group (repeated to
    the group's channels here, ``paddle.repeat_interleave``).
    """
    groups = int(call.attr("num_groups"))
    channels = int(x.shape[1])
    if int(scale.shape[0]) == groups and groups != channels:
        scale = paddle.repeat_interleave(scale, channels // groups)
        bias = paddle.repeat_interleave(bias, channels // groups)
    eps = float(np.float32(call.attr("epsilon", 1e-5)))
    return F.group_norm(x, groups, epsilon=eps, weight=scale, bias=bias)


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


#: ONNX GridSample modes (opset 16 and opset 20 names) -> ``F.grid_sample``'s.
_GRID_MODES = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest",
               "bicubic": "bicubic", "cubic": "bicubic"}  # fmt: skip


@register("paddle", "GridSample")
def grid_sample(call: NodeCall, x: Tensor, grid: Tensor) -> Tensor:
    """ONNX GridSample: ``F.grid_sample``, linear or nearest (padding zeros, border,
    reflection); paddle has no bicubic kernel, so cubic is composed
    (:func:`~anpred.translate.paddle.grid_cubic.grid_sample_cubic`).
    """
    mode = _GRID_MODES[call.attr("mode", "bilinear" if call.opset < 20 else "linear")]
    if mode == "bicubic":
        return grid_sample_cubic(call, x, grid)
    return F.grid_sample(
        x, grid, mode=mode, padding_mode=call.attr("padding_mode", "zeros"),
        align_corners=bool(call.attr("align_corners", 0)),
    )  # fmt: skip


def _nll(call: NodeCall, log_prob: Tensor, target: Tensor, weight: Tensor | None) -> Tensor:
    ignore = call.attr("ignore_index")
    return F.nll_loss(
        log_prob, paddle.cast(target, "int64"), weight=weight,
        ignore_index=-100 if ignore is None else int(ignore),
        reduction=call.attr("reduction", "mean"),
    )  # fmt: skip


@register("paddle", "NegativeLogLikelihoodLoss")
def nll_loss(call: NodeCall, x: Tensor, target: Tensor, weight: Tensor = None) -> Tensor:
    """ONNX NegativeLogLikelihoodLoss: ``F.nll_loss``."""
    return _nll(call, x, target, weight)


@register("paddle", "SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(
    call: NodeCall, scores: Tensor, labels: Tensor, weight: Tensor = None
) -> tuple[Tensor, Tensor]:
    """ONNX SoftmaxCrossEntropyLoss: ``F.nll_loss`` of ``F.log_softmax`` over axis 1."""
    log_prob = F.log_softmax(scores, axis=1)
    return _nll(call, log_prob, labels, weight), log_prob


_SCATTER_REDUCE = {"none": "assign", "add": "add", "mul": "mul", "max": "amax", "min": "amin"}


@register("paddle", "ScatterElements")
def scatter_elements(call: NodeCall, x: Tensor, indices: Tensor, updates: Tensor) -> Tensor:
    """ONNX ScatterElements: ``paddle.put_along_axis`` (reduction none/add/mul/max/min)."""
    axis = int(call.attr("axis", 0)) % x.ndim
    indices = paddle.cast(indices, "int64")
    indices = paddle.where(indices < 0, indices + x.shape[axis], indices)
    reduce = _SCATTER_REDUCE[call.attr("reduction", "none")]
    return paddle.put_along_axis(x, indices, updates, axis, reduce=reduce, broadcast=False)


@register("paddle", "GatherND")
def gather_nd(call: NodeCall, x: Tensor, indices: Tensor) -> Tensor:
    """ONNX GatherND: ``paddle.gather_nd``; negative indices wrapped; ``batch_dims`` leading
    dimensions shared by data and indices are flattened into one and prepended as an index
    column (``paddle.gather_nd`` has no batch dimensions).
    """
    batch = int(call.attr("batch_dims", 0))
    depth = int(indices.shape[-1])
    dims = paddle.to_tensor(list(x.shape[batch : batch + depth]), dtype=indices.dtype)
    indices = paddle.where(indices < 0, indices + dims, indices)
    if batch == 0:
        return paddle.gather_nd(x, indices)
    lead = list(x.shape[:batch])
    count = int(np.prod(lead))
    data = paddle.reshape(x, [count, *x.shape[batch:]])
    middle = list(indices.shape[batch:-1])
    index = paddle.reshape(indices, [count, int(np.prod(middle)), depth])
    rows = paddle.arange(count, dtype=indices.dtype).reshape([count, 1, 1])
    rows = paddle.expand(rows, [count, index.shape[1], 1])
    gathered = paddle.gather_nd(data, paddle.concat([rows, index], axis=-1))
    return paddle.reshape(gathered, [*lead, *middle, *x.shape[batch + depth :]])
