"""Convolution and pooling ONNX ops, NCHW (``lax.conv_general_dilated``, ``lax.reduce_window``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
from jax import lax

from anpred.errors import UsageError
from anpred.translate.jax.numerics import current, index_dtype
from anpred.translate.jax.registration import register
from anpred.translate.registry import NodeCall

#: ``dimension_numbers`` of ``lax.conv_general_dilated`` by number of spatial dims.
_CONV_LAYOUTS = {
    1: ("NCH", "OIH", "NCH"),
    2: ("NCHW", "OIHW", "NCHW"),
    3: ("NCDHW", "OIDHW", "NCDHW"),
}

Pads = list[tuple[int, int]]


def window_pads(
    call: NodeCall,
    spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> Pads:
    """Return per-axis ``(begin, end)`` padding from ``pads`` or ``auto_pad``.

    Args:
        call: The Conv/pool node.
        spatial: Input spatial sizes.
        kernel: Kernel spatial sizes.
        strides: Strides.
        dilations: Dilations.
    """
    auto_pad = call.attr("auto_pad", "NOTSET")
    n = len(spatial)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, large = total // 2, total - total // 2
            pads.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
        return pads
    if auto_pad == "VALID":
        return [(0, 0)] * n
    flat = [int(p) for p in call.attr("pads", [0] * (2 * n))]
    return [(flat[i], flat[i + n]) for i in range(n)]


def _ceil_mode_pads(
    spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Pads,
) -> Pads:
    """Extend the end padding so that ``ceil_mode`` windows fit (as torch and ONNX do).

    A last window that would start inside the end padding is dropped.
    """
    extended = []
    for size, k, s, d, (lo, hi) in zip(spatial, kernel, strides, dilations, pads, strict=True):
        span = (k - 1) * d + 1
        out = -(-(size + lo + hi - span) // s) + 1
        if (out - 1) * s >= size + lo:
            out -= 1
        extra = max(0, (out - 1) * s + span - size - lo - hi)
        extended.append((lo, hi + extra))
    return extended


def _window_geometry(call: NodeCall, x: Any) -> tuple[list[int], list[int], list[int], Pads, Pads]:
    """Kernel, strides, dilations, ONNX pads and pads extended for ``ceil_mode``."""
    kernel = [int(k) for k in call.attr("kernel_shape")]
    n = len(kernel)
    strides = [int(s) for s in call.attr("strides", [1] * n)]
    dilations = [int(d) for d in call.attr("dilations", [1] * n)]
    spatial = list(x.shape[2:])
    pads = window_pads(call, spatial, kernel, strides, dilations)
    total = pads
    if call.attr("ceil_mode", 0):
        total = _ceil_mode_pads(spatial, kernel, strides, dilations, pads)
    return kernel, strides, dilations, pads, total


@register("Conv")
def conv(call: NodeCall, x: Any, w: Any, b: Any = None) -> Any:
    """N-d convolution (1-, 2-, 3-d) with groups, strides, dilations, pads, auto_pad."""
    n = w.ndim - 2
    kernel = list(w.shape[2:])
    strides = [int(s) for s in call.attr("strides", [1] * n)]
    dilations = [int(d) for d in call.attr("dilations", [1] * n)]
    pads = window_pads(call, list(x.shape[2:]), kernel, strides, dilations)
    y = lax.conv_general_dilated(
        x,
        w,
        window_strides=strides,
        padding=pads,
        rhs_dilation=dilations,
        dimension_numbers=_CONV_LAYOUTS[n],
        feature_group_count=int(call.attr("group", 1)),
        precision=current().precision,
    )
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * n)
    return y


@register("MaxPool")
def max_pool(call: NodeCall, x: Any) -> Any:
    """Max pooling (pads, strides, dilations, ceil_mode) and its Indices output.

    The Indices output is one variadic ``lax.reduce_window`` over (values, flat ONNX index
    of every element: row-major, or column-major within each plane with ``storage_order``
    1) whose reducer keeps the larger value, and on a tie the smaller index (the first
    element of the window, as ONNX's reference and onnxruntime report).
    """
    kernel, strides, dilations, _, total = _window_geometry(call, x)
    if jnp.issubdtype(x.dtype, jnp.floating):
        init = -jnp.inf
    else:
        init = jnp.iinfo(x.dtype).min
    if len(call.output_shapes) > 1:
        return list(_max_pool_with_indices(call, x, init, kernel, strides, dilations, total))
    return lax.reduce_window(
        x,
        jnp.asarray(init, dtype=x.dtype),
        lax.max,
        window_dimensions=(1, 1, *kernel),
        window_strides=(1, 1, *strides),
        padding=((0, 0), (0, 0), *total),
        window_dilation=(1, 1, *dilations),
    )


def _max_pool_with_indices(
    call: NodeCall,
    x: Any,
    init: Any,
    kernel: list[int],
    strides: list[int],
    dilations: list[int],
    total: Pads,
) -> tuple[Any, Any]:
    index = lax.iota(index_dtype(), math.prod(x.shape)).reshape(x.shape)
    if call.attr("storage_order", 0):
        if x.ndim != 4:
            raise UsageError(f"MaxPool node {call.name}: storage_order 1 beyond 2-D")
        height, width = x.shape[2:]
        plane = index % (height * width)
        index = index - plane + (plane % width) * height + plane // width
    largest = jnp.asarray(jnp.iinfo(index.dtype).max, dtype=index.dtype)

    def keep_max(a: tuple[Any, Any], b: tuple[Any, Any]) -> tuple[Any, Any]:
        take_b = (b[0] > a[0]) | ((b[0] == a[0]) & (b[1] < a[1]))
        return jnp.where(take_b, b[0], a[0]), jnp.where(take_b, b[1], a[1])

    return lax.reduce_window(
        (x, index),
        (jnp.asarray(init, dtype=x.dtype), largest),
        keep_max,
        window_dimensions=(1, 1, *kernel),
        window_strides=(1, 1, *strides),
        padding=((0, 0), (0, 0), *total),
        window_dilation=(1, 1, *dilations),
    )


@register("AveragePool")
def average_pool(call: NodeCall, x: Any) -> Any:
    """Average pooling; ``count_include_pad`` counts the ONNX pads, never ceil_mode's."""
    kernel, strides, dilations, pads, total = _window_geometry(call, x)
    window = {
        "window_dimensions": (1, 1, *kernel),
        "window_strides": (1, 1, *strides),
        "window_dilation": (1, 1, *dilations),
    }
    zero = jnp.asarray(0, dtype=x.dtype)
    sums = lax.reduce_window(x, zero, lax.add, padding=((0, 0), (0, 0), *total), **window)
    if all(p == (0, 0) for p in total):
        return sums / math.prod(kernel)
    ones = jnp.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
    if call.attr("count_include_pad", 0):
        ones = jnp.pad(ones, ((0, 0), (0, 0), *pads), constant_values=1)
        extra = [(0, t_hi - p_hi) for (_, p_hi), (_, t_hi) in zip(pads, total, strict=True)]
    else:
        extra = total
    counts = lax.reduce_window(ones, zero, lax.add, padding=((0, 0), (0, 0), *extra), **window)
    return sums / counts


@register("GlobalAveragePool")
def global_average_pool(call: NodeCall, x: Any) -> Any:
    """Mean over all spatial axes, kept as size-1 axes."""
    return jnp.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@register("GlobalMaxPool")
def global_max_pool(call: NodeCall, x: Any) -> Any:
    """Maximum over all spatial axes, kept as size-1 axes."""
    return jnp.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)
