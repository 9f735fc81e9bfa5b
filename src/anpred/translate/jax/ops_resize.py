"""Resize, separably, one axis at a time.

Which source positions feed each output position depends only on static shapes and
attributes, so the positions and the linear weights are computed in NumPy (float64) at
translation time; the interpolation itself (gathers, products, sums) runs in jax.

Cubic, antialias, ``keep_aspect_ratio_policy`` and ``tf_crop_and_resize`` run as
separable filter taps (:mod:`anpred.translate.resize_taps`). ``jax.image.resize`` /
``jax.image.scale_and_translate`` are not used for them: their cubic kernel is Keys' with
``a = -0.5`` (ONNX's default is -0.75) and their antialias filter is PIL's, which differs
from ONNX's (up to 0.17 on ``test_resize_downsample_sizes_linear_antialias`` of ONNX's
backend tests, 1.7 when scales are given, since they map with ``out / in``).
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from anpred.errors import UsageError
from anpred.translate.jax.registration import register
from anpred.translate.jax.static import normalize_axes, static_floats, static_ints
from anpred.translate.registry import NodeCall
from anpred.translate.resize_taps import (
    axis_taps,
    extrapolation_mask,
    plan,
    split_shape,
    tap_layout,
)
from anpred.translate.upsample import as_resize


def _source_coordinates(mode: str, out_size: int, in_size: int, scale: float) -> np.ndarray:
    """Position in the input of every output index (ONNX coordinate_transformation_mode)."""
    x = np.arange(out_size, dtype=np.float64)
    if mode == "asymmetric":
        return x / scale
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out_size > 1 else np.full(out_size, -0.5)
    if mode == "tf_half_pixel_for_nn":
        return (x + 0.5) / scale
    if mode == "align_corners":
        if out_size == 1:
            return np.zeros(1)
        return x * (in_size - 1) / (out_size - 1)
    if mode == "half_pixel_symmetric":
        adjustment = out_size / (scale * in_size)
        offset = in_size / 2 * (1 - adjustment)
        return offset + (x + 0.5) / scale - 0.5
    raise UsageError(f"Resize coordinate_transformation_mode {mode!r} has no jax translation")


def _nearest_indices(coords: np.ndarray, rule: str, in_size: int) -> np.ndarray:
    """Round source positions to indices (ONNX nearest_mode), clamped to the input."""
    frac = coords - np.floor(coords)
    if rule == "floor":
        index = np.floor(coords)
    elif rule == "ceil":
        index = np.ceil(coords)
    elif rule == "round_prefer_floor":
        index = np.where(frac <= 0.5, np.floor(coords), np.ceil(coords))
    elif rule == "round_prefer_ceil":
        index = np.where(frac < 0.5, np.floor(coords), np.ceil(coords))
    else:
        raise UsageError(f"Resize nearest_mode {rule!r} has no jax translation")
    return np.clip(index, 0, in_size - 1).astype(np.int32)


def _resize_axis(x: Any, axis: int, out_size: int, scale: float, call: NodeCall) -> Any:
    in_size = x.shape[axis]
    coords = _source_coordinates(
        call.attr("coordinate_transformation_mode", "half_pixel"), out_size, in_size, scale
    )
    mode = call.attr("mode", "nearest")
    if mode == "nearest":
        rule = call.attr("nearest_mode", "round_prefer_floor")
        return jnp.take(x, jnp.asarray(_nearest_indices(coords, rule, in_size)), axis=axis)
    if mode == "linear":
        low = np.floor(coords)
        weight = coords - low
        low_index = np.clip(low, 0, in_size - 1).astype(np.int32)
        high_index = np.clip(low + 1, 0, in_size - 1).astype(np.int32)
        shape = [1] * x.ndim
        shape[axis] = out_size
        w = jnp.asarray(weight.reshape(shape), dtype=x.dtype)
        below = jnp.take(x, jnp.asarray(low_index), axis=axis)
        above = jnp.take(x, jnp.asarray(high_index), axis=axis)
        return below * (1 - w) + above * w
    raise UsageError(f"Resize mode {mode!r} of node {call.name} has no jax translation")


def _by_taps(call: NodeCall, x: Any, roi: Any, scales: Any, sizes: Any) -> Any:
    """Resize as separable filter taps: one gather, product and sum per resized axis."""
    crop = call.attr("coordinate_transformation_mode") == "tf_crop_and_resize"
    geometry = plan(
        call,
        x.shape,
        static_floats(call, 1, roi, "roi") if crop else None,
        static_floats(call, 2, scales, "scales"),
        static_ints(call, 3, sizes, "sizes"),
    )
    fill = float(call.attr("extrapolation_value", 0.0))
    for axis in geometry.resized(x.shape):
        taps = axis_taps(call, geometry, x.shape, axis)
        index, weight = tap_layout(taps, x.ndim)
        gathered = jnp.take(x, jnp.asarray(index), axis=axis).reshape(split_shape(x.shape, taps))
        x = jnp.sum(gathered * jnp.asarray(weight, dtype=x.dtype), axis=axis + 1)
        mask = extrapolation_mask(taps, x.ndim)
        if mask is not None:
            x = jnp.where(jnp.asarray(mask), jnp.asarray(fill, dtype=x.dtype), x)
    return x


def _needs_taps(call: NodeCall) -> bool:
    return (
        call.attr("mode", "nearest") == "cubic"
        or bool(call.attr("antialias", 0))
        or call.attr("keep_aspect_ratio_policy", "stretch") != "stretch"
        or call.attr("coordinate_transformation_mode") == "tf_crop_and_resize"
    )


@register("Resize")
def resize(
    call: NodeCall,
    x: Any,
    roi: Any = None,
    scales: Any = None,
    sizes: Any = None,
) -> Any:
    """Resize by ``scales`` or to ``sizes`` (every mode and coordinate transformation)."""
    if call.opset < 11:  # Resize-10: (X, scales)
        roi, scales = None, roi
    elif _needs_taps(call):
        return _by_taps(call, x, roi, scales, sizes)
    axes = normalize_axes(call.attr("axes", range(x.ndim)), x.ndim)
    factors = static_floats(call, 2 if call.opset >= 11 else 1, scales, "scales") or None
    targets = static_ints(call, 3, sizes, "sizes") if call.opset >= 11 else None
    for position, axis in enumerate(axes):
        in_size = x.shape[axis]
        if targets:
            out_size = targets[position]
            scale = out_size / in_size
        elif factors:
            scale = factors[position]
            out_size = math.floor(in_size * scale)
        else:
            raise UsageError(f"Resize node {call.name} has neither scales nor sizes")
        if out_size == in_size and math.isclose(scale, 1.0):
            continue
        x = _resize_axis(x, axis, out_size, scale, call)
    return x


@register("Upsample", since=7)
def upsample(call: NodeCall, x: Any, scales: Any = None) -> Any:
    """ONNX Upsample (opset 7-9): the equivalent asymmetric Resize (nearest floor, linear)."""
    resize_call = as_resize(call)
    return resize(resize_call, x, None, resize_call.const(2))
