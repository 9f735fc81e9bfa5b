"""Sampling grids: GridSample and AffineGrid, in ONNX's layout.

TensorFlow has no grid sampler (``tf.image`` resamples on regular grids only), so
GridSample is composed for any number of spatial axes: the grid's normalised coordinates
are mapped to pixel coordinates (``align_corners``), brought inside the image for
``border`` (clip) and ``reflection`` (folded back), split into interpolation taps per
axis (nearest: the coordinate rounded half to even; linear: 2 taps; cubic: 4 taps with
Keys' coefficients, ``a = -0.75``), and the taps are read with ``tf.gather`` from the
flattened image (``zeros`` padding masks taps outside it, the other modes clip or reflect
the tap's index as ONNX's reference does). AffineGrid multiplies the homogeneous base grid
by ``theta`` with ``tf.linalg.matmul``.
"""

from __future__ import annotations

import itertools
import math

from anpred.errors import AnpredError
from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import onnx_op
from anpred.translate.tensorflow.lean_import import tf

#: ONNX GridSample modes (opset 16 names and opset 20 names) -> this module's.
_MODES = {"bilinear": "linear", "linear": "linear", "nearest": "nearest",
          "bicubic": "cubic", "cubic": "cubic"}  # fmt: skip
_CUBIC_A = -0.75


def _reflect(v: tf.Tensor, low: float, high: float) -> tf.Tensor:
    """Fold ``v`` back into ``[low, high]`` by reflecting at the nearer border, repeatedly."""
    span = high - low
    if span <= 0:
        return tf.zeros_like(v) + low
    below = low - v
    above = v - high
    dx = tf.where(v < low, below, above)
    turns = tf.floor(dx / span)
    rest = dx - turns * span
    even = tf.equal(tf.math.floormod(turns, 2.0), 0.0)
    from_below = tf.where(even, low + rest, high - rest)
    from_above = tf.where(even, high - rest, low + rest)
    return tf.where(v < low, from_below, tf.where(v > high, from_above, v))


def _cubic_weights(t: tf.Tensor) -> list[tf.Tensor]:
    """Keys' cubic convolution weights of taps at offsets -1, 0, 1, 2 from ``floor``."""
    a = _CUBIC_A

    def far(d: tf.Tensor) -> tf.Tensor:  # 1 <= |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    def near(d: tf.Tensor) -> tf.Tensor:  # |d| < 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _taps(
    coord: tf.Tensor, size: int, mode: str, padding: str, bounds: tuple[float, float]
) -> list[tuple[tf.Tensor, tf.Tensor | None, tf.Tensor]]:
    """(index, weight or None, valid) of each interpolation tap of one axis."""
    if mode == "nearest":
        starts, weights = [tf.cast(coord, tf.int64)], [None]
    else:
        base = tf.floor(coord)
        t = coord - base
        first = tf.cast(base, tf.int64)
        if mode == "linear":
            starts, weights = [first, first + 1], [1 - t, t]
        else:
            starts = [first + k for k in (-1, 0, 1, 2)]
            weights = _cubic_weights(t)
    taps = []
    for index, weight in zip(starts, weights, strict=True):
        valid = tf.logical_and(index >= 0, index < size)
        if padding == "reflection":
            folded = _reflect(tf.cast(index, coord.dtype), *bounds)
            index = tf.cast(folded, tf.int64)
        index = tf.clip_by_value(index, 0, size - 1)
        taps.append((index, weight, valid))
    return taps


@onnx_op("GridSample", since=16)
def grid_sample(call: NodeCall, x: tf.Tensor, grid: tf.Tensor) -> tf.Tensor:
    """ONNX GridSample (linear, nearest, cubic; zeros, border, reflection; any rank;
    composed, see the module).
    """
    mode = _MODES[call.attr("mode", "bilinear" if call.opset < 20 else "linear")]
    padding = call.attr("padding_mode", "zeros")
    align = bool(call.attr("align_corners", 0))
    shape = x.shape.as_list()
    sizes = shape[2:]
    if any(s is None for s in sizes) or shape[1] is None:
        raise AnpredError(f"tensorflow GridSample: needs static image sizes (node {call.name})")
    nd = len(sizes)
    per_axis = []
    for axis, size in enumerate(sizes):
        g = grid[..., nd - 1 - axis]  # the grid lists coordinates innermost axis first
        if align:
            coord = (g + 1) / 2 * (size - 1)
            bounds = (0.0, float(size - 1))
        else:
            coord = ((g + 1) * size - 1) / 2
            bounds = (-0.5, size - 0.5)
        if mode == "nearest":
            coord = tf.round(coord)  # half to even, as ONNX's reference (and PyTorch)
        outside = tf.logical_or(coord < bounds[0], coord > bounds[1])
        if padding == "border":
            coord = tf.where(outside, tf.clip_by_value(coord, 0.0, float(size - 1)), coord)
        elif padding == "reflection":
            coord = tf.where(outside, _reflect(coord, *bounds), coord)
        per_axis.append(_taps(coord, size, mode, padding, bounds))
    strides = [math.prod(sizes[axis + 1 :]) for axis in range(nd)]
    batch = tf.shape(grid)[0]
    flat_x = tf.reshape(x, [-1, shape[1], math.prod(sizes)])
    out_shape = tf.shape(grid)[1:-1]
    total = None
    for combo in itertools.product(*per_axis):
        linear = sum(index * stride for (index, _, _), stride in zip(combo, strides, strict=True))
        picked = tf.gather(flat_x, tf.reshape(linear, [batch, -1]), axis=2, batch_dims=1)
        scale = None
        for _, weight, valid in combo:
            factor = weight if weight is not None else tf.ones_like(grid[..., 0])
            if padding == "zeros":
                factor = tf.where(valid, factor, tf.zeros_like(factor))
            scale = factor if scale is None else scale * factor
        term = picked * tf.reshape(scale, [batch, 1, -1])
        total = term if total is None else total + term
    return tf.reshape(total, tf.concat([[batch, shape[1]], out_shape], 0))


@onnx_op("AffineGrid", since=20)
def affine_grid(call: NodeCall, theta: tf.Tensor, size: tf.Tensor) -> tf.Tensor:
    """ONNX AffineGrid: the sampling grid of 2-D or 3-D affine matrices (``theta @ [x; 1]``),
    the base grid built from ``size`` (static or run-time) with ``tf.range``/``tf.meshgrid``.
    """
    nd = int(size.shape[0]) - 2
    dims = tf.cast(tf.reshape(size, [-1])[2:], tf.int64)
    align = bool(call.attr("align_corners", 0))
    axes = []
    for i in range(nd):
        d = dims[i]
        steps = tf.cast(tf.range(d), theta.dtype)
        count = tf.cast(d, theta.dtype)
        if align:
            spread = steps * 2 / tf.maximum(count - 1, 1) - 1
            axes.append(tf.where(d == 1, tf.zeros_like(steps), spread))
        else:
            axes.append((2 * steps + 1) / count - 1)
    mesh = tf.meshgrid(*axes, indexing="ij")  # per axis, outermost first
    base = tf.stack([*mesh[::-1], tf.ones_like(mesh[0])], -1)
    base = tf.reshape(base, [1, -1, nd + 1])
    out = tf.linalg.matmul(base, theta, transpose_b=True)  # (N, points, nd)
    return tf.reshape(out, tf.concat([[-1], dims, [nd]], 0))
