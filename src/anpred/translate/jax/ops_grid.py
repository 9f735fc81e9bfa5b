"""Grid sampling jax translators: GridSample and AffineGrid.

jax has no grid-sampling kernel, so GridSample is composed: the grid is denormalised to
pixel coordinates, padded (``border`` clamps, ``reflection`` folds) as ONNX's reference
does, and every output point is the weighted sum of its taps (1 for nearest, 2 per axis
for linear, 4 per axis for cubic, Keys' A = -0.75), each tap gathered by advanced indexing
(``jnp`` take) with out-of-image taps zero, clamped or reflected by the padding mode.
AffineGrid is a matrix product of the base grid (``jnp.linspace``) with ``theta``.
"""

from __future__ import annotations

import itertools
from typing import Any

import jax.numpy as jnp

from anpred.translate.jax.numerics import current
from anpred.translate.jax.registration import register
from anpred.translate.jax.static import static_ints
from anpred.translate.registry import NodeCall

#: ONNX GridSample modes (opset 16 names and opset 20 names) -> the names used here.
_MODES = {"bilinear": "linear", "linear": "linear", "nearest": "nearest",
          "bicubic": "cubic", "cubic": "cubic"}  # fmt: skip
#: Keys' cubic convolution parameter (ONNX's GridSample and Resize).
_CUBIC_A = -0.75


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _reflect(x: Any, low: float, high: float) -> Any:
    """Fold ``x`` into ``[low, high]`` by reflecting at the nearer border, repeatedly."""
    span = max(high - low, 1e-12)
    below, above = x < low, x > high
    dist = jnp.where(below, low - x, x - high)
    folds = jnp.floor(dist / span)
    rest = dist - folds * span
    even = jnp.remainder(folds, 2) == 0
    from_below = jnp.where(even, low + rest, high - rest)
    from_above = jnp.where(even, high - rest, low + rest)
    return jnp.where(below, from_below, jnp.where(above, from_above, x))


def _cubic(t: Any) -> list[Any]:
    """Keys' cubic weights of the taps at -1, 0, 1, 2 for a fraction ``t`` in [0, 1)."""
    a = _CUBIC_A
    return [
        ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
        ((a + 2) * t - (a + 3)) * t * t + 1,
        ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
        ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a,
    ]


def _tap(index: Any, size: int, low: float, high: float, padding: str) -> tuple[Any, Any]:
    """Integer index of a tap (float ``index``) inside the image, and whether it counts."""
    if padding == "reflection":
        index = jnp.trunc(_reflect(index, low, high))
    inside = (index >= 0) & (index <= size - 1)
    clamped = jnp.clip(index, 0, size - 1).astype(jnp.int32)
    return clamped, inside if padding == "zeros" else None


@register("GridSample")
def grid_sample(call: NodeCall, x: Any, grid: Any) -> Any:
    """ONNX GridSample, 2-D and 3-D: nearest, linear, cubic; zeros, border or reflection
    padding; ``align_corners`` (composed, see the module docstring).
    """
    mode = _MODES[_text(call.attr("mode", "bilinear" if call.opset < 20 else "linear"))]
    padding = _text(call.attr("padding_mode", "zeros"))
    align = bool(call.attr("align_corners", 0))
    spatial = x.shape[2:]
    nd = len(spatial)
    grid = grid.astype(x.dtype)
    taps_per_axis = []
    for d, size in enumerate(spatial):
        g = grid[..., nd - 1 - d]  # the grid's last axis lists (x, y[, z]): innermost first
        pos = (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2
        low, high = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        if mode == "nearest":
            pos = jnp.round(pos)  # half to even, as numpy's rint in ONNX's reference
        outside = (pos < low) | (pos > high)
        if padding == "border":
            pos = jnp.where(outside, jnp.clip(pos, 0, size - 1), pos)
        elif padding == "reflection":
            pos = jnp.where(outside, _reflect(pos, low, high), pos)
        if mode == "nearest":
            taps = [(jnp.trunc(pos), None)]
        else:
            first = jnp.floor(pos)
            t = pos - first
            if mode == "linear":
                taps = [(first, 1 - t), (first + 1, t)]
            else:
                taps = [(first + k - 1, w) for k, w in enumerate(_cubic(t))]
        taps_per_axis.append([(*_tap(i, size, low, high, padding), w) for i, w in taps])
    channels_last = jnp.moveaxis(x, 1, -1)  # (N, spatial..., C)
    batch = jnp.arange(x.shape[0]).reshape((-1,) + (1,) * (grid.ndim - 2))
    out = None
    for combo in itertools.product(*taps_per_axis):
        weight = None
        for _, inside, w in combo:
            for factor in (w, inside):
                if factor is not None:
                    factor = factor.astype(x.dtype)
                    weight = factor if weight is None else weight * factor
        values = channels_last[(batch, *(index for index, _, _ in combo))]
        term = values if weight is None else values * weight[..., None]
        out = term if out is None else out + term
    return jnp.moveaxis(out, -1, 1)


@register("AffineGrid")
def affine_grid(call: NodeCall, theta: Any, size: Any) -> Any:
    """ONNX AffineGrid: ``theta`` (N, 2, 3) or (N, 3, 4) applied to the base grid of
    ``size`` (static), in (x, y[, z]) order; ``align_corners`` places the end points.
    """
    shape = static_ints(call, 1, size, "size")
    spatial = shape[2:]
    align = bool(call.attr("align_corners", 0))
    axes = []
    for n in spatial:
        if align:
            axes.append(jnp.linspace(-1.0, 1.0, n, dtype=theta.dtype))
        else:
            axes.append(((jnp.arange(n, dtype=theta.dtype) * 2 + 1) / n - 1).astype(theta.dtype))
    mesh = jnp.meshgrid(*axes, indexing="ij")  # per axis, outer first
    ones = jnp.ones_like(mesh[0])
    base = jnp.stack([*mesh[::-1], ones], axis=-1)  # (spatial..., nd + 1), innermost first
    flat = base.reshape(-1, len(spatial) + 1)
    out = jnp.einsum("pk,njk->npj", flat, theta, precision=current().precision)
    return out.reshape((theta.shape[0], *spatial, len(spatial)))
