"""Indexing and construction ONNX ops: Concat, Split, Slice, Gather, Pad, ConstantOfShape, Range."""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax
from onnx import helper

from anpred.errors import UsageError
from anpred.translate.jax.numerics import onnx_dtype
from anpred.translate.jax.registration import register
from anpred.translate.jax.static import normalize_axes, static_floats, static_ints
from anpred.translate.registry import NodeCall


@register("Concat")
def concat(call: NodeCall, *xs: Any) -> Any:
    """Concatenate along ``axis``."""
    return jnp.concatenate(xs, axis=int(call.attr("axis")))


@register("Split")
def split(call: NodeCall, x: Any, sizes: Any = None) -> tuple[Any, ...]:
    """Split along ``axis`` by sizes (input from opset 13, attribute before) or evenly.

    Even splits follow opset 18's ``num_outputs`` rule: chunks of ``ceil(dim / n)``,
    the last one smaller.
    """
    axis = int(call.attr("axis", 0))
    axis = axis + x.ndim if axis < 0 else axis
    given = static_ints(call, 1, sizes, "split") if call.opset >= 13 else call.attr("split")
    if not given:
        count = int(call.attr("num_outputs", len(call.output_shapes)))
        chunk = -(-x.shape[axis] // count)
        given = [chunk] * (count - 1) + [x.shape[axis] - chunk * (count - 1)]
    parts, start = [], 0
    for size in given:
        parts.append(lax.slice_in_dim(x, start, start + int(size), axis=axis))
        start += int(size)
    return tuple(parts)


@register("Slice")
def slice_(
    call: NodeCall,
    x: Any,
    starts: Any = None,
    ends: Any = None,
    axes: Any = None,
    steps: Any = None,
) -> Any:
    """Strided slice; negative indices count from the end, huge ends are clamped."""
    if call.opset < 10:
        begin = [int(v) for v in call.attr("starts")]
        end = [int(v) for v in call.attr("ends")]
        axis_list = call.attr("axes")
        stride = None
    else:
        begin = static_ints(call, 1, starts, "starts")
        end = static_ints(call, 2, ends, "ends")
        axis_list = static_ints(call, 3, axes, "axes")
        stride = static_ints(call, 4, steps, "steps")
    axis_list = normalize_axes(axis_list if axis_list is not None else range(len(begin)), x.ndim)
    stride = stride or [1] * len(begin)
    index = [slice(None)] * x.ndim
    for b, e, a, s in zip(begin, end, axis_list, stride, strict=True):
        # Python's slice clamping is ONNX's; a negative canonical stop means "past index 0".
        lo, hi, step = slice(b, e, s).indices(x.shape[a])
        index[a] = slice(lo, None if hi < 0 else hi, step)
    return x[tuple(index)]


@register("Gather")
def gather(call: NodeCall, x: Any, indices: Any) -> Any:
    """Take ``indices`` (scalar or tensor, negatives from the end) along ``axis``."""
    axis = int(call.attr("axis", 0))
    static = call.const(1)
    if static is not None:
        axis_size = x.shape[axis]
        normalized = np.where(static < 0, static + axis_size, static)
        return jnp.take(x, jnp.asarray(normalized), axis=axis)
    return jnp.take(x, indices, axis=axis)


@register("GatherND")
def gather_nd(call: NodeCall, x: Any, indices: Any) -> Any:
    """ONNX GatherND, composed (jax has no gather_nd): advanced indexing of a view whose
    ``batch_dims`` leading axes are flattened into one, indexed by ``jnp.arange``; negative
    indices wrapped.
    """
    batch = int(call.attr("batch_dims", 0))
    depth = int(indices.shape[-1])
    lead = x.shape[:batch]
    flat_x = x.reshape((math.prod(lead), *x.shape[batch:]))
    flat_i = indices.reshape((math.prod(lead), *indices.shape[batch:]))
    index = [jnp.arange(flat_x.shape[0]).reshape((-1, *([1] * (flat_i.ndim - 2))))]
    for k in range(depth):
        part = flat_i[..., k]
        index.append(jnp.where(part < 0, part + flat_x.shape[1 + k], part))
    picked = flat_x[tuple(index)]
    return picked.reshape((*lead, *indices.shape[batch:-1], *x.shape[batch + depth :]))


@register("Pad")
def pad(
    call: NodeCall, x: Any, pads: Any = None, constant_value: Any = None, axes: Any = None
) -> Any:
    """Pad (constant, reflect, edge, wrap); negative pads crop."""
    mode = call.attr("mode", "constant")
    if call.opset < 11:
        flat = [int(p) for p in call.attr("pads")]
        value: Any = float(call.attr("value", 0.0))
        axis_list = list(range(x.ndim))
    else:
        flat = static_ints(call, 1, pads, "pads")
        given_axes = static_ints(call, 3, axes, "axes")
        axis_list = normalize_axes(given_axes, x.ndim) if given_axes else list(range(x.ndim))
        static_fill = call.const(2)
        if constant_value is None:
            value = 0
        elif static_fill is not None and np.asarray(static_fill).size:
            value = np.asarray(static_fill).reshape(-1)[0].item()
        else:
            value = constant_value.reshape(())
    n = len(axis_list)
    width = [(0, 0)] * x.ndim
    for i, a in enumerate(axis_list):
        width[a] = (flat[i], flat[i + n])
    crop = tuple(slice(max(0, -lo), x.shape[a] - max(0, -hi)) for a, (lo, hi) in enumerate(width))
    x = x[crop]
    grow = [(max(0, lo), max(0, hi)) for lo, hi in width]
    if mode == "constant":
        return jnp.pad(x, grow, mode="constant", constant_values=value)
    if mode in ("reflect", "edge", "wrap"):
        return jnp.pad(x, grow, mode=mode)
    raise UsageError(f"Pad node {call.name}: mode {mode!r} has no jax translation")


@register("ConstantOfShape")
def constant_of_shape(call: NodeCall, shape: Any) -> Any:
    """Return a tensor of ``shape`` filled with the ``value`` attribute (default float 0)."""
    dims = static_ints(call, 0, shape, "shape")
    value = call.attr("value")
    fill = np.zeros(1, dtype=np.float32) if value is None else np.asarray(value)
    dtype = onnx_dtype(helper.np_dtype_to_tensor_dtype(fill.dtype))
    return jnp.full(dims, fill.reshape(-1)[0].item(), dtype=dtype)


@register("Range")
def range_(call: NodeCall, start: Any, limit: Any, delta: Any) -> Any:
    """``start + delta * [0, 1, ...]`` up to ``limit`` (the bounds must be static)."""
    (first,) = static_floats(call, 0, start, "start")
    (last,) = static_floats(call, 1, limit, "limit")
    (step,) = static_floats(call, 2, delta, "delta")
    count = max(math.ceil((last - first) / step), 0)
    steps = lax.iota(start.dtype, count)
    return steps * delta + start
