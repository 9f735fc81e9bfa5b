"""Indexing paddle translators: ScatterND, block rearrangements, selections, KV-cache writes.

Index inputs may be negative (counted from the end of their axis) and are wrapped first.
Ops whose output size depends on values (Compress, Unique) read them back from the tensor,
which only eager execution allows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import paddle

from anpred.translate.paddle.dtypes import paddle_dtype
from anpred.translate.paddle.ops_transformer import scatter_elements
from anpred.translate.paddle.static_values import ints, static_value
from anpred.translate.registry import NodeCall, register

Tensor = Any

#: ONNX reduction attribute -> ``paddle.put_along_axis``'s ``reduce``.
_SCATTER_REDUCE = {"none": "assign", "add": "add", "mul": "mul", "max": "amax", "min": "amin"}


def _wrapped(indices: Tensor, size: int) -> Tensor:
    indices = paddle.cast(indices, "int64")
    return paddle.where(indices < 0, indices + size, indices)


register("paddle", "Scatter")(scatter_elements)  # deprecated alias (opsets 9-10)


@register("paddle", "ScatterND")
def scatter_nd(call: NodeCall, x: Tensor, indices: Tensor, updates: Tensor) -> Tensor:
    """ONNX ScatterND; ``reduction`` none, add, mul, max or min.

    Composed: the first ``k`` axes of ``x`` (``k = indices.shape[-1]``) become one axis,
    addressed by the row-major linear index of each index tuple, and the updates scatter
    along it with ``paddle.put_along_axis`` (paddle's ``scatter_nd_add`` only adds).
    """
    depth = int(indices.shape[-1])
    shape = list(x.shape)
    head, tail = shape[:depth], shape[depth:]
    linear = paddle.zeros(list(indices.shape[:-1]), dtype="int64")
    for k in range(depth):
        linear = linear * head[k] + _wrapped(indices[..., k], head[k])
    flat_x = paddle.reshape(x, [math.prod(head), *tail])
    flat_u = paddle.reshape(updates, [-1, *tail])
    index = paddle.reshape(linear, [-1] + [1] * len(tail)).expand(flat_u.shape)
    reduce = _SCATTER_REDUCE[call.attr("reduction", "none")]
    out = paddle.put_along_axis(flat_x, index, flat_u, 0, reduce=reduce, broadcast=False)
    return paddle.reshape(out, shape)


def _blocks(call: NodeCall, x: Tensor) -> tuple[int, list[int], bool]:
    return int(call.attr("blocksize")), list(x.shape), call.attr("mode", "DCR") == "CRD"


@register("paddle", "SpaceToDepth")
def space_to_depth(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX SpaceToDepth (DCR: block offset major; CRD, opset 25+: channel major), composed
    of ``paddle.reshape`` and ``paddle.transpose``.
    """
    b, (n, c, h, w), crd = _blocks(call, x)
    y = paddle.reshape(x, [n, c, h // b, b, w // b, b])
    y = paddle.transpose(y, [0, 1, 3, 5, 2, 4] if crd else [0, 3, 5, 1, 2, 4])
    return paddle.reshape(y, [n, c * b * b, h // b, w // b])


@register("paddle", "DepthToSpace")
def depth_to_space(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX DepthToSpace (DCR default, CRD), composed of reshape and transpose."""
    b, (n, c, h, w), crd = _blocks(call, x)
    if crd:
        y = paddle.transpose(paddle.reshape(x, [n, c // (b * b), b, b, h, w]), [0, 1, 4, 2, 5, 3])
    else:
        y = paddle.transpose(paddle.reshape(x, [n, b, b, c // (b * b), h, w]), [0, 3, 4, 1, 5, 2])
    return paddle.reshape(y, [n, c // (b * b), h * b, w * b])


@register("paddle", "Compress")
def compress(call: NodeCall, x: Tensor, condition: Tensor) -> Tensor:
    """ONNX Compress: the slices along ``axis`` (flattened input without) where true."""
    axis = call.attr("axis")
    if axis is None:
        x, dim = paddle.reshape(x, [-1]), 0
    else:
        dim = int(axis) % x.ndim
    mask = np.asarray(static_value(call, 1, "condition", condition)).reshape(-1).astype(bool)
    chosen = np.nonzero(mask[: x.shape[dim]])[0].astype(np.int64)
    return paddle.index_select(x, paddle.to_tensor(chosen), axis=dim)


@register("paddle", "ReverseSequence")
def reverse_sequence(call: NodeCall, x: Tensor, lengths: Tensor) -> Tensor:
    """ONNX ReverseSequence: reverse the first ``lengths[i]`` steps of every batch entry.

    Composed as ``paddle.take_along_axis`` along the time axis with per-entry reversed
    positions.
    """
    batch_axis, time_axis = int(call.attr("batch_axis", 1)), int(call.attr("time_axis", 0))
    steps = paddle.reshape(paddle.arange(x.shape[time_axis], dtype="int64"), [-1, 1])
    limit = paddle.reshape(paddle.cast(lengths, "int64"), [1, -1])
    source = paddle.where(steps < limit, limit - 1 - steps, steps)  # (time, batch)
    if batch_axis < time_axis:
        source = paddle.transpose(source, [1, 0])
    shape = [1] * x.ndim
    shape[batch_axis], shape[time_axis] = x.shape[batch_axis], x.shape[time_axis]
    index = paddle.reshape(source, shape).expand(x.shape)
    return paddle.take_along_axis(x, index, time_axis, broadcast=False)


@register("paddle", "EyeLike")
def eye_like(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX EyeLike: ones on diagonal ``k`` of a matrix shaped as ``x`` (``dtype``)."""
    dtype = paddle_dtype(int(call.attr("dtype"))) if call.attr("dtype") else x.dtype
    k = int(call.attr("k", 0))
    ones = paddle.ones(list(x.shape), dtype="float64")
    return paddle.cast(paddle.tril(paddle.triu(ones, k), k), dtype)


@register("paddle", "TensorScatter")
def tensor_scatter(
    call: NodeCall, cache: Tensor, update: Tensor, write_indices: Tensor = None
) -> Tensor:
    """ONNX TensorScatter (a KV-cache write): ``update`` into ``cache`` along ``axis``
    from each batch entry's write index (``linear``; ``circular`` wraps around).

    ``paddle.put_along_axis`` (assign) per batch entry at the written positions.
    """
    axis = int(call.attr("axis", -2)) % cache.ndim
    length, steps = int(cache.shape[axis]), int(update.shape[axis])
    starts = (
        [0] * int(cache.shape[0])
        if write_indices is None
        else ints(static_value(call, 2, "write_indices", write_indices))
    )
    entries = []
    for b, start in enumerate(starts):
        positions = np.arange(steps) + start
        if call.attr("mode", "linear") == "circular":
            positions = positions % length
        shape = [1] * (cache.ndim - 1)
        shape[axis - 1] = steps
        index = paddle.to_tensor(positions.reshape(shape)).expand(update[b].shape)
        entries.append(paddle.put_along_axis(cache[b], index, update[b], axis - 1, broadcast=False))
    return paddle.stack(entries)


@register("paddle", "Unique")
def unique(call: NodeCall, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """ONNX Unique: values (sorted, or in order of first occurrence with ``sorted=0``),
    first indices, inverse indices and counts; along ``axis`` or over the flattened input.

    ``paddle.unique`` gives sorted values and the first indices, inverse and counts; with
    ``sorted=0`` they are reordered by first index.
    """
    axis = call.attr("axis")
    if axis is None:
        x, dim = paddle.reshape(x, [-1]), 0
    else:
        dim = int(axis) % x.ndim
    values, first, inverse, counts = paddle.unique(
        x, return_index=True, return_inverse=True, return_counts=True, axis=dim, dtype="int64"
    )
    inverse = paddle.reshape(inverse, [-1])
    if not call.attr("sorted", 1):
        order = paddle.argsort(first)
        rank = paddle.argsort(order)
        values = paddle.index_select(values, order, axis=dim)
        first, counts = paddle.gather(first, order), paddle.gather(counts, order)
        inverse = paddle.gather(rank, inverse)
    return values, first, inverse, counts
