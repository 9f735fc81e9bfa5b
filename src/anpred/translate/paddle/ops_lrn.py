"""LRN and the variadic Sum / Mean, with paddle's own operators (NCHW)."""

from __future__ import annotations

import functools
from typing import Any

import paddle
import paddle.nn.functional as F

from anpred.translate.lrn_window import lrn_window
from anpred.translate.registry import NodeCall, register

Tensor = Any


@register("paddle", "LRN")
def lrn(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX LRN: ``F.local_response_norm`` for an odd ``size`` (a centred window).

    An even ``size`` (ONNX puts the extra channel after the centre, paddle before it) sums
    the squares of channel-shifted slices.
    """
    win = lrn_window(call)
    if win.symmetric and x.ndim in (3, 4, 5):
        return F.local_response_norm(x, win.size, win.alpha, win.beta, win.bias)
    sq = x * x
    channels = x.shape[1]
    pad = [0, 0, win.before, win.after] + [0, 0] * (x.ndim - 2)
    padded = F.pad(sq, pad, mode="constant", value=0.0)
    total = functools.reduce(paddle.add, [padded[:, i : i + channels] for i in range(win.size)])
    return x / paddle.pow(win.bias + (win.alpha / win.size) * total, win.beta)


@register("paddle", "Sum")
def total(call: NodeCall, *inputs: Tensor) -> Tensor:
    """ONNX Sum over any number of broadcast inputs (added left to right)."""
    return functools.reduce(paddle.add, inputs)


@register("paddle", "Mean")
def mean(call: NodeCall, *inputs: Tensor) -> Tensor:
    """ONNX Mean: the Sum of the inputs divided by their number."""
    return functools.reduce(paddle.add, inputs) / len(inputs)
