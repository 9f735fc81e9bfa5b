"""Activation torch translators beyond ReLU: the ELU family, GELU, Softplus, Swish, Shrink ...

ONNX float attributes, their defaults included, are float32 values; defaults are written
as such so that a float64 run computes exactly what the ONNX node says. Where torch's
kernel hard-codes other constants (``F.selu``), the op is composed from the kernel that
takes them as arguments (``F.elu``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name

from anpred.translate.registry import NodeCall, register

_LIB = "torch"

Tensor = torch.Tensor


def _f32(call: NodeCall, key: str, default: float) -> float:
    """Float attribute ``key`` as ONNX stores it (float32), default included."""
    return float(np.float32(call.attr(key, default)))


@register(_LIB, "Elu")
def elu(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Elu (``alpha`` default 1)."""
    return F.elu(x, _f32(call, "alpha", 1.0))


@register(_LIB, "Selu")
def selu(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Selu ``gamma * elu(x, alpha)``; ``F.elu`` takes the node's float32 constants."""
    alpha = _f32(call, "alpha", 1.67326319217681884765625)
    gamma = _f32(call, "gamma", 1.05070102214813232421875)
    return F.elu(x, alpha) * gamma


@register(_LIB, "Celu")
def celu(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Celu (``alpha`` default 1)."""
    return F.celu(x, _f32(call, "alpha", 1.0))


@register(_LIB, "Gelu", since=20)
def gelu(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Gelu: exact (``approximate="none"``) or the tanh approximation."""
    return F.gelu(x, approximate=call.attr("approximate", "none"))


@register(_LIB, "Softplus")
def softplus(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Softplus ``log(exp(x) + 1)`` as ``torch.logaddexp(x, 0)``.

    ``F.softplus`` returns ``x`` itself above its threshold (20), a relative error of up
    to 1e-10 that a float64 reference must not carry; ``logaddexp`` is exact everywhere.
    """
    return torch.logaddexp(x, torch.zeros_like(x))


@register(_LIB, "Softsign")
def softsign(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Softsign ``x / (1 + |x|)``."""
    return F.softsign(x)


@register(_LIB, "Mish")
def mish(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Mish ``x * tanh(softplus(x))``."""
    return F.mish(x)


@register(_LIB, "Swish")
def swish(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Swish ``x * sigmoid(alpha * x)``; ``F.silu`` when ``alpha`` is 1."""
    alpha = _f32(call, "alpha", 1.0)
    if alpha == 1.0:
        return F.silu(x)
    return x * torch.sigmoid(x * alpha)


@register(_LIB, "ThresholdedRelu")
def thresholded_relu(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX ThresholdedRelu: ``x`` where ``x > alpha`` (default 1), else 0."""
    return F.threshold(x, _f32(call, "alpha", 1.0), 0.0)


@register(_LIB, "Shrink")
def shrink(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Shrink: ``x + bias`` below ``-lambd``, ``x - bias`` above ``lambd``, else 0.

    ``F.softshrink`` when ``bias == lambd`` (float inputs); composed with ``torch.where``
    otherwise (any bias, integer inputs).
    """
    lambd, bias = _f32(call, "lambd", 0.5), _f32(call, "bias", 0.0)
    if x.dtype.is_floating_point and bias == lambd:
        return F.softshrink(x, lambd)
    zero = torch.zeros_like(x)
    shifted_up = (x + bias).to(x.dtype)
    shifted_down = (x - bias).to(x.dtype)
    return torch.where(x < -lambd, shifted_up, torch.where(x > lambd, shifted_down, zero))


@register(_LIB, "PRelu")
def prelu(call: NodeCall, x: Tensor, slope: Tensor) -> Tensor:
    """ONNX PRelu: ``slope * x`` where ``x < 0``; the slope broadcasts to ``x``.

    ``F.prelu`` for a per-channel (or single) slope, the exported form; other broadcast
    slopes go through ``torch.where``.
    """
    if x.dtype.is_floating_point and x.ndim >= 2:
        per_channel = slope.numel() == 1 or (
            slope.numel() == x.shape[1]
            and tuple(slope.shape) in ((x.shape[1],), (x.shape[1],) + (1,) * (x.ndim - 2))
        )
        if per_channel:
            return F.prelu(x, slope.reshape(-1))
    return torch.where(x < 0, x * slope, x)


def _flattened(fn: Callable[[Tensor, int], Tensor]) -> Callable[..., Tensor]:
    """An op before opset 13: along all axes from ``axis`` (default 1), input seen as 2-D."""

    def translate(call: NodeCall, x: Tensor) -> Tensor:
        axis = int(call.attr("axis", 1)) % max(x.ndim, 1)
        rows = math.prod(x.shape[:axis])
        return fn(x.reshape(rows, -1), 1).reshape(x.shape)

    return translate


def _one_axis(fn: Callable[[Tensor, int], Tensor]) -> Callable[..., Tensor]:
    """An op from opset 13 on: along one axis (default -1)."""

    def translate(call: NodeCall, x: Tensor) -> Tensor:
        return fn(x, int(call.attr("axis", -1)))

    return translate


def _log_softmax(x: Tensor, dim: int) -> Tensor:
    return torch.log_softmax(x, dim=dim)


def _hardmax(x: Tensor, dim: int) -> Tensor:
    """1 at the first maximum along ``dim``, 0 elsewhere."""
    dim = dim % x.ndim
    hot = F.one_hot(torch.argmax(x, dim=dim), x.shape[dim]).to(x.dtype)
    return torch.movedim(hot, -1, dim)


register(_LIB, "LogSoftmax")(_flattened(_log_softmax))
register(_LIB, "LogSoftmax", since=13)(_one_axis(_log_softmax))
register(_LIB, "Hardmax")(_flattened(_hardmax))
register(_LIB, "Hardmax", since=13)(_one_axis(_hardmax))


@register(_LIB, "SwiGLU")
def swiglu(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
    """ONNX SwiGLU ``a * sigmoid(alpha * a) * b``; ``F.silu`` for ``alpha`` 1."""
    alpha = _f32(call, "alpha", 1.0)
    gate = F.silu(a) if alpha == 1.0 else a * torch.sigmoid(a * alpha)
    return gate * b
