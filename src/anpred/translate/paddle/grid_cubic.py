"""Bicubic GridSample composed from paddle ops (``F.grid_sample`` has no bicubic mode).

The grid's normalised coordinates are mapped to pixel coordinates (``align_corners``),
brought inside the image for ``border`` (clip) and ``reflection`` (folded back), split
into 4 taps per axis with Keys' cubic coefficients (``a = -0.75``, ONNX's), and the taps
are read with ``paddle.take_along_axis`` from the flattened image (``zeros`` padding masks
taps outside it; the other modes clip or reflect the tap's index as ONNX's reference
does). Any number of spatial axes.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import paddle

from anpred.translate.registry import NodeCall

Tensor = Any

#: Keys' cubic convolution parameter ONNX's GridSample uses.
_CUBIC_A = -0.75


def _reflect(v: Tensor, low: float, high: float) -> Tensor:
    """Fold ``v`` back into ``[low, high]`` by reflecting at the nearer border, repeatedly."""
    span = high - low
    if span <= 0:
        return paddle.zeros_like(v) + low
    dx = paddle.where(v < low, low - v, v - high)
    turns = paddle.floor(dx / span)
    rest = dx - turns * span
    even = paddle.remainder(turns, paddle.full_like(turns, 2.0)) == 0
    from_below = paddle.where(even, low + rest, high - rest)
    from_above = paddle.where(even, high - rest, low + rest)
    return paddle.where(v < low, from_below, paddle.where(v > high, from_above, v))


def _cubic_weights(t: Tensor) -> list[Tensor]:
    """Keys' weights of the taps at offsets -1, 0, 1, 2 from ``floor``."""
    a = _CUBIC_A

    def far(d: Tensor) -> Tensor:  # 1 <= |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    def near(d: Tensor) -> Tensor:  # |d| < 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _taps(
    coord: Tensor, size: int, padding: str, bounds: tuple[float, float]
) -> list[tuple[Tensor, Tensor]]:
    """(index, weight) of the 4 taps of one axis; ``zeros`` padding zeroes outside weights."""
    base = paddle.floor(coord)
    first = paddle.cast(base, "int64")
    taps = []
    for k, weight in zip((-1, 0, 1, 2), _cubic_weights(coord - base), strict=True):
        index = first + k
        if padding == "zeros":
            valid = paddle.logical_and(index >= 0, index < size)
            weight = paddle.where(valid, weight, paddle.zeros_like(weight))
        elif padding == "reflection":
            index = paddle.cast(_reflect(paddle.cast(index, coord.dtype), *bounds), "int64")
        taps.append((paddle.clip(index, 0, size - 1), weight))
    return taps


def grid_sample_cubic(call: NodeCall, x: Tensor, grid: Tensor) -> Tensor:
    """ONNX GridSample in cubic mode (see the module); zeros, border or reflection padding."""
    padding = call.attr("padding_mode", "zeros")
    align = bool(call.attr("align_corners", 0))
    batch, channels, *sizes = (int(d) for d in x.shape)
    nd = len(sizes)
    per_axis = []
    for axis, size in enumerate(sizes):
        g = grid[..., nd - 1 - axis]  # the grid lists coordinates innermost axis first
        if align:
            coord, bounds = (g + 1) / 2 * (size - 1), (0.0, float(size - 1))
        else:
            coord, bounds = ((g + 1) * size - 1) / 2, (-0.5, size - 0.5)
        outside = paddle.logical_or(coord < bounds[0], coord > bounds[1])
        if padding == "border":
            coord = paddle.where(outside, paddle.clip(coord, 0.0, float(size - 1)), coord)
        elif padding == "reflection":
            coord = paddle.where(outside, _reflect(coord, *bounds), coord)
        per_axis.append(_taps(coord, size, padding, bounds))
    strides = [math.prod(sizes[axis + 1 :]) for axis in range(nd)]
    flat_x = paddle.reshape(x, [batch, channels, math.prod(sizes)])
    out_shape = [int(d) for d in grid.shape[1:-1]]
    total = None
    for combo in itertools.product(*per_axis):
        linear = sum(index * stride for (index, _), stride in zip(combo, strides, strict=True))
        index = paddle.reshape(linear, [batch, 1, -1]).expand([batch, channels, -1])
        picked = paddle.take_along_axis(flat_x, index, 2, broadcast=False)
        scale = combo[0][1]
        for _, weight in combo[1:]:
            scale = scale * weight
        term = picked * paddle.reshape(scale, [batch, 1, -1])
        total = term if total is None else total + term
    return paddle.reshape(total, [batch, channels, *out_shape])
