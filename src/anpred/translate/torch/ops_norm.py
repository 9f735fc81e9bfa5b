"""Normalisation torch translators beyond BatchNormalization and LayerNormalization.

InstanceNormalization, GroupNormalization, RMSNormalization, MeanVarianceNormalization and
LpNormalization. Default epsilons are float32 values, as ONNX float attributes are.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name

from anpred.translate.registry import NodeCall, register

_LIB = "torch"

Tensor = torch.Tensor


def _eps(call: NodeCall, default: float = 1e-5) -> float:
    return float(np.float32(call.attr("epsilon", default)))


@register(_LIB, "InstanceNormalization")
def instance_norm(call: NodeCall, x: Tensor, scale: Tensor, bias: Tensor) -> Tensor:
    """ONNX InstanceNormalization: per sample and channel over the spatial axes."""
    return F.instance_norm(x, weight=scale, bias=bias, eps=_eps(call))


@register(_LIB, "GroupNormalization")
def group_norm(call: NodeCall, x: Tensor, scale: Tensor, bias: Tensor) -> Tensor:
    """ONNX GroupNormalization: ``num_groups`` groups of channels; ``F.group_norm``.

    Opset 21 gives scale and bias per channel; opset 18 gave them per group (repeated to
    the group's channels here).
    """
    groups = int(call.attr("num_groups"))
    channels = x.shape[1]
    if scale.numel() == groups and groups != channels:
        scale = torch.repeat_interleave(scale, channels // groups)
        bias = torch.repeat_interleave(bias, channels // groups)
    return F.group_norm(x, groups, scale, bias, _eps(call))


@register(_LIB, "RMSNormalization")
def rms_norm(call: NodeCall, x: Tensor, scale: Tensor) -> Tensor:
    """ONNX RMSNormalization over the axes from ``axis`` (default -1) on; ``F.rms_norm``.

    A scale that only broadcasts to the normalised shape multiplies the unscaled result.
    """
    axis = int(call.attr("axis", -1)) % x.ndim
    shape = tuple(x.shape[axis:])
    if tuple(scale.shape) == shape:
        return F.rms_norm(x, shape, scale, _eps(call))
    return F.rms_norm(x, shape, None, _eps(call)) * scale


@register(_LIB, "MeanVarianceNormalization")
def mean_variance_norm(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX MeanVarianceNormalization over ``axes`` (default N, H, W), as its function body.

    ``(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)``.
    """
    dims = tuple(int(a) % x.ndim for a in call.attr("axes", [0, 2, 3]))
    mean = torch.mean(x, dim=dims, keepdim=True)
    variance = torch.mean(x * x, dim=dims, keepdim=True) - mean * mean
    return (x - mean) / (torch.sqrt(variance) + float(np.float32(1e-9)))


@register(_LIB, "LpNormalization")
def lp_norm(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX LpNormalization: ``x / ||x||_p`` along ``axis`` (p 1 or 2); a zero norm gives 0."""
    dim = int(call.attr("axis", -1)) % x.ndim
    p = int(call.attr("p", 2))
    norm = torch.linalg.vector_norm(x, ord=p, dim=dim, keepdim=True)
    return torch.where(norm == 0, torch.zeros_like(x), x / norm)
