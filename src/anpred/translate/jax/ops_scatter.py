"""Scatter-family and selection jax translators: ScatterElements (and the deprecated
Scatter), ScatterND, TensorScatter, Compress, ReverseSequence, EyeLike, BitCast.

Scatters are ``x.at[index].set`` (or ``.add``/``.multiply``/``.max``/``.min`` for a
``reduction``), jax's functional form of ``lax.scatter``; negative indices are wrapped
first, as ONNX specifies.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax
from onnx import helper

from anpred.translate.jax.numerics import onnx_dtype
from anpred.translate.jax.registration import register
from anpred.translate.jax.static import static_value
from anpred.translate.registry import NodeCall


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _wrapped(index: Any, size: int) -> Any:
    """Indices with negative ones counted from the end (ONNX's rule)."""
    index = index.astype(jnp.int32)
    return jnp.where(index < 0, index + size, index)


def _scatter(x: Any, where: tuple[Any, ...], updates: Any, reduction: str) -> Any:
    at = x.at[where]
    if reduction == "none":
        return at.set(updates, mode="drop")
    method = {"add": at.add, "mul": at.multiply, "max": at.max, "min": at.min}[reduction]
    return method(updates, mode="drop")


@register("ScatterElements")
def scatter_elements(call: NodeCall, x: Any, indices: Any, updates: Any) -> Any:
    """ONNX ScatterElements along ``axis``; ``reduction`` none, add, mul, max or min."""
    axis = int(call.attr("axis", 0)) % x.ndim
    where = list(jnp.indices(indices.shape, sparse=True))
    where[axis] = _wrapped(indices, x.shape[axis])
    return _scatter(x, tuple(where), updates, _text(call.attr("reduction", "none")))


register("Scatter")(scatter_elements)  # deprecated alias (opsets 9-10)


@register("ScatterND")
def scatter_nd(call: NodeCall, x: Any, indices: Any, updates: Any) -> Any:
    """ONNX ScatterND: ``updates`` at the index tuples of ``indices``'s last axis."""
    depth = indices.shape[-1]
    where = tuple(_wrapped(indices[..., k], x.shape[k]) for k in range(depth))
    return _scatter(x, where, updates, _text(call.attr("reduction", "none")))


@register("TensorScatter")
def tensor_scatter(call: NodeCall, cache: Any, update: Any, write_indices: Any = None) -> Any:
    """ONNX TensorScatter (a KV-cache write): ``update`` into ``cache`` along ``axis`` from
    each batch entry's write index (``linear``; ``circular`` wraps around).
    """
    axis = int(call.attr("axis", -2)) % cache.ndim
    length, steps = cache.shape[axis], update.shape[axis]
    batch = cache.shape[0]
    if write_indices is None:
        starts = jnp.zeros((batch,), jnp.int32)
    else:
        starts = write_indices.astype(jnp.int32).reshape(batch)
    positions = starts[:, None] + jnp.arange(steps, dtype=jnp.int32)[None, :]  # (B, steps)
    if _text(call.attr("mode", "linear")) == "circular":
        positions = jnp.remainder(positions, length)
    moved_cache = jnp.moveaxis(cache, axis, 1)
    moved_update = jnp.moveaxis(update, axis, 1)
    rows = jnp.arange(batch)[:, None]
    out = moved_cache.at[rows, positions].set(moved_update, mode="drop")
    return jnp.moveaxis(out, 1, axis)


@register("Compress")
def compress(call: NodeCall, x: Any, condition: Any) -> Any:
    """ONNX Compress: the slices along ``axis`` (of the flattened input without) where the
    static ``condition`` is true (jax programs have static shapes).
    """
    chosen = np.flatnonzero(static_value(call, 1, condition, "condition"))
    axis = call.attr("axis")
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = int(axis) % x.ndim
    return jnp.take(x, chosen[chosen < x.shape[axis]], axis=axis)


@register("ReverseSequence")
def reverse_sequence(call: NodeCall, x: Any, lengths: Any) -> Any:
    """ONNX ReverseSequence: reverse the first ``lengths[i]`` steps of every batch entry
    (a ``jnp.take_along_axis`` over the time axis with per-entry reversed positions).
    """
    batch_axis, time_axis = int(call.attr("batch_axis", 1)), int(call.attr("time_axis", 0))
    steps = jnp.arange(x.shape[time_axis]).reshape(-1, 1)  # (time, 1)
    limit = lengths.astype(jnp.int32).reshape(1, -1)  # (1, batch)
    source = jnp.where(steps < limit, limit - 1 - steps, steps)  # (time, batch)
    if batch_axis < time_axis:
        source = source.T
    shape = [1] * x.ndim
    shape[batch_axis], shape[time_axis] = x.shape[batch_axis], x.shape[time_axis]
    index = jnp.broadcast_to(source.reshape(shape), x.shape)
    return jnp.take_along_axis(x, index, axis=time_axis)


@register("EyeLike")
def eye_like(call: NodeCall, x: Any) -> Any:
    """ONNX EyeLike: ones on diagonal ``k`` of a matrix shaped as ``x`` (``dtype``)."""
    dtype = onnx_dtype(int(call.attr("dtype"))) if call.attr("dtype") else x.dtype
    return jnp.eye(x.shape[0], x.shape[1], k=int(call.attr("k", 0)), dtype=dtype)


@register("BitCast")
def bit_cast(call: NodeCall, x: Any) -> Any:
    """ONNX BitCast between types of one width: ``lax.bitcast_convert_type`` (the exact
    ONNX type, never the graph's float dtype).
    """
    return lax.bitcast_convert_type(x, helper.tensor_dtype_to_np_dtype(int(call.attr("to"))))
