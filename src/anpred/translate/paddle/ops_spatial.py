"""Spatial paddle translators: CenterCropPad, AffineGrid, CausalConvWithState."""

from __future__ import annotations

from typing import Any

import paddle
import paddle.nn.functional as F

from anpred.translate.paddle.static_values import ints, static_value
from anpred.translate.registry import NodeCall, register

Tensor = Any


@register("paddle", "CenterCropPad")
def center_crop_pad(call: NodeCall, x: Tensor, shape: Tensor) -> Tensor:
    """ONNX CenterCropPad: crop or zero-pad each of ``axes`` (default all) to ``shape``.

    A crop (``paddle.slice``) starts at ``(size - target) // 2``; a pad (``F.pad``, full
    rank) puts ``(target - size) // 2`` before.
    """
    target = ints(static_value(call, 1, "shape", shape))
    axes = [int(a) % x.ndim for a in call.attr("axes", range(x.ndim))]
    for axis, want in zip(axes, target, strict=True):
        size = int(x.shape[axis])
        if want < size:
            start = (size - want) // 2
            x = paddle.slice(x, [axis], [start], [start + want])
        elif want > size:
            before = (want - size) // 2
            pads = [0] * (2 * x.ndim)
            pads[2 * axis], pads[2 * axis + 1] = before, want - size - before
            x = F.pad(x, pads, mode="constant", value=0.0)
    return x


@register("paddle", "AffineGrid")
def affine_grid(call: NodeCall, theta: Tensor, size: Tensor) -> Tensor:
    """ONNX AffineGrid: the sampling grid of 2-D or 3-D affine matrices, ``F.affine_grid``."""
    shape = ints(static_value(call, 1, "size", size))
    return F.affine_grid(theta, shape, align_corners=bool(call.attr("align_corners", 0)))


@register("paddle", "CausalConvWithState")
def causal_conv_with_state(
    call: NodeCall, x: Tensor, w: Tensor, b: Tensor = None, past_state: Tensor = None
) -> tuple[Tensor, Tensor]:
    """ONNX CausalConvWithState: a depthwise 1-D convolution (``F.conv1d``) over
    ``past_state`` (zeros by default) followed by the input; ``silu``/``swish`` activation
    (``F.silu``); the last ``k - 1`` steps are the present state.
    """
    batch, channels = int(x.shape[0]), int(x.shape[1])
    k = int(w.shape[2])
    if past_state is None:
        past_state = paddle.zeros([batch, channels, k - 1], dtype=x.dtype)
    padded = paddle.concat([past_state, x], axis=2)
    y = F.conv1d(padded, w, b, groups=channels)
    if call.attr("activation", "none") in ("silu", "swish"):
        y = F.silu(y)
    length = int(padded.shape[2])
    return y, paddle.slice(padded, [2], [length - (k - 1)], [length])
