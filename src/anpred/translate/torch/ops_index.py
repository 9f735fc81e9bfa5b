"""Indexing torch translators: gathers, scatters, TopK, block rearrangements, selections.

Index inputs may be negative (counted from the end of their axis) and are normalised
first. Ops whose output size depends on values (Compress, NonZero) read them back from
the tensor, which only eager execution allows.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name

from anpred.translate.registry import NodeCall, register
from anpred.translate.torch.adapter import run_float
from anpred.translate.torch.ops_elementwise import ONNX_TO_TORCH

_LIB = "torch"

Tensor = torch.Tensor

#: ONNX reduction attribute -> ``torch.scatter_reduce``'s name.
_SCATTER_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _wrapped(indices: Tensor, size: int) -> Tensor:
    indices = indices.to(torch.int64)
    return torch.where(indices < 0, indices + size, indices)


@register(_LIB, "GatherElements")
def gather_elements(call: NodeCall, x: Tensor, indices: Tensor) -> Tensor:
    """ONNX GatherElements along ``axis``: ``torch.gather``."""
    dim = int(call.attr("axis", 0)) % x.ndim
    return torch.gather(x, dim, _wrapped(indices, x.shape[dim]))


@register(_LIB, "GatherND")
def gather_nd(call: NodeCall, x: Tensor, indices: Tensor) -> Tensor:
    """ONNX GatherND with ``batch_dims``: advanced indexing on the leading axes."""
    batch = int(call.attr("batch_dims", 0))
    depth = indices.shape[-1]
    lead = x.shape[:batch]
    flat_x = x.reshape((math.prod(lead), *x.shape[batch:]))
    flat_i = indices.reshape((math.prod(lead), *indices.shape[batch:]))
    index = [
        torch.arange(flat_x.shape[0]).reshape((-1, *([1] * (flat_i.ndim - 2)))),
        *(_wrapped(flat_i[..., k], flat_x.shape[1 + k]) for k in range(depth)),
    ]
    picked = flat_x[tuple(index)]
    return picked.reshape((*lead, *indices.shape[batch:-1], *x.shape[batch + depth :]))


@register(_LIB, "ScatterElements")
def scatter_elements(call: NodeCall, x: Tensor, indices: Tensor, updates: Tensor) -> Tensor:
    """ONNX ScatterElements along ``axis``; ``reduction`` none, add, mul, max or min."""
    dim = int(call.attr("axis", 0)) % x.ndim
    index = _wrapped(indices, x.shape[dim])
    reduction = call.attr("reduction", "none")
    if reduction == "none":
        return torch.scatter(x, dim, index, updates)
    return torch.scatter_reduce(x, dim, index, updates, _SCATTER_REDUCE[reduction])


register(_LIB, "Scatter")(scatter_elements)  # deprecated alias (opsets 9-10)


@register(_LIB, "ScatterND")
def scatter_nd(call: NodeCall, x: Tensor, indices: Tensor, updates: Tensor) -> Tensor:
    """ONNX ScatterND; ``reduction`` none, add, mul, max or min.

    The first ``k`` axes of ``x`` (``k = indices.shape[-1]``) become one axis, addressed
    by the row-major linear index of each index tuple; the updates then scatter along it
    (``torch.scatter``/``torch.scatter_reduce`` on axis 0).
    """
    depth = indices.shape[-1]
    head, tail = x.shape[:depth], x.shape[depth:]
    linear = torch.zeros(indices.shape[:-1], dtype=torch.int64)
    for k in range(depth):
        linear = linear * head[k] + _wrapped(indices[..., k], head[k])
    rows = math.prod(head)
    flat_x = x.reshape((rows, *tail))
    flat_u = updates.reshape((-1, *tail))
    index = linear.reshape((-1, *([1] * len(tail)))).expand_as(flat_u)
    reduction = call.attr("reduction", "none")
    if reduction == "none":
        out = torch.scatter(flat_x, 0, index, flat_u)
    else:
        out = torch.scatter_reduce(flat_x, 0, index, flat_u, _SCATTER_REDUCE[reduction])
    return out.reshape(x.shape)


@register(_LIB, "TopK")
def top_k(call: NodeCall, x: Tensor, k: Tensor | int | None = None) -> tuple[Tensor, Tensor]:
    """ONNX TopK (``k`` an input from opset 10, an attribute before); ``largest``, ``axis``.

    A stable ``torch.sort`` keeps equal values in index order, ONNX's tie rule, which
    ``torch.topk`` does not promise.
    """
    dim = int(call.attr("axis", -1)) % x.ndim
    if call.opset < 10:
        count = int(call.attr("k"))
    else:
        static = call.const(1)
        count = int(np.asarray(static).reshape(-1)[0]) if static is not None else int(k.item())  # type: ignore[union-attr]
    largest = bool(call.attr("largest", 1))
    values, indices = torch.sort(x, dim=dim, descending=largest, stable=True)
    return torch.narrow(values, dim, 0, count), torch.narrow(indices, dim, 0, count)


@register(_LIB, "SpaceToDepth")
def space_to_depth(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX SpaceToDepth: blocks to channels.

    ``F.pixel_unshuffle`` in CRD mode (channel major, opset 25+); the default DCR mode
    (block offset major) composed of reshape and permute.
    """
    b = int(call.attr("blocksize"))
    if call.attr("mode", "DCR") == "CRD":
        return F.pixel_unshuffle(x, b)
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


@register(_LIB, "DepthToSpace")
def depth_to_space(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX DepthToSpace: ``F.pixel_shuffle`` in CRD mode; DCR (default) composed."""
    b = int(call.attr("blocksize"))
    if call.attr("mode", "DCR") == "CRD":
        return F.pixel_shuffle(x, b)
    n, c, h, w = x.shape
    y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    return y.reshape(n, c // (b * b), h * b, w * b)


@register(_LIB, "Compress")
def compress(call: NodeCall, x: Tensor, condition: Tensor) -> Tensor:
    """ONNX Compress: the slices along ``axis`` (flattened input without) where true."""
    axis = call.attr("axis")
    if axis is None:
        x, dim = x.reshape(-1), 0
    else:
        dim = int(axis) % x.ndim
    chosen = torch.nonzero(condition.reshape(-1)).reshape(-1)
    return torch.index_select(x, dim, chosen[chosen < x.shape[dim]])


@register(_LIB, "NonZero")
def non_zero(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX NonZero: indices of the non-zero elements, one row per axis (int64)."""
    return torch.nonzero(x).T.contiguous()


@register(_LIB, "ReverseSequence")
def reverse_sequence(call: NodeCall, x: Tensor, lengths: Tensor) -> Tensor:
    """ONNX ReverseSequence: reverse the first ``lengths[i]`` steps of every batch entry.

    Composed as a gather along the time axis with per-entry reversed positions.
    """
    batch_axis, time_axis = int(call.attr("batch_axis", 1)), int(call.attr("time_axis", 0))
    steps = torch.arange(x.shape[time_axis]).reshape(-1, 1)  # (time, 1)
    limit = lengths.to(torch.int64).reshape(1, -1)  # (1, batch)
    source = torch.where(steps < limit, limit - 1 - steps, steps)  # (time, batch)
    if batch_axis < time_axis:
        source = source.T
    shape = [1] * x.ndim
    shape[batch_axis], shape[time_axis] = x.shape[batch_axis], x.shape[time_axis]
    return torch.gather(x, time_axis, source.reshape(shape).expand_as(x))


@register(_LIB, "EyeLike")
def eye_like(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX EyeLike: ones on diagonal ``k`` of a matrix shaped as ``x`` (``dtype``)."""
    dtype = ONNX_TO_TORCH[int(call.attr("dtype"))] if call.attr("dtype") else x.dtype
    k = int(call.attr("k", 0))
    ones = torch.ones(x.shape, dtype=run_float(dtype))
    return torch.tril(torch.triu(ones, k), k)


@register(_LIB, "OneHot")
def one_hot(call: NodeCall, indices: Tensor, depth: Tensor, values: Tensor) -> Tensor:
    """ONNX OneHot: ``values[1]`` at each index along the new ``axis``, ``values[0]`` else."""
    static = call.const(1)
    count = int(np.asarray(static).reshape(-1)[0]) if static is not None else int(depth.item())
    index = indices.to(torch.int64)
    index = torch.where(index < 0, index + count, index)
    inside = (index >= 0) & (index < count)  # an index out of range hits no position
    hot = F.one_hot(index.clamp(0, count - 1), count).to(torch.bool) & inside.unsqueeze(-1)
    y = torch.where(hot, values[1], values[0])
    return torch.movedim(y, -1, int(call.attr("axis", -1)) % y.ndim)


@register(_LIB, "TensorScatter")
def tensor_scatter(
    call: NodeCall, cache: Tensor, update: Tensor, write_indices: Tensor | None = None
) -> Tensor:
    """ONNX TensorScatter (a KV-cache write): ``update`` into ``cache`` along ``axis``
    from each batch entry's write index (``linear``; ``circular`` wraps around).

    ``torch.index_copy`` per batch entry.
    """
    axis = int(call.attr("axis", -2)) % cache.ndim
    length, steps = cache.shape[axis], update.shape[axis]
    starts = [0] * cache.shape[0] if write_indices is None else write_indices.tolist()
    entries = []
    for b, start in enumerate(starts):
        positions = torch.arange(steps) + int(start)
        if call.attr("mode", "linear") == "circular":
            positions = torch.remainder(positions, length)
        entries.append(torch.index_copy(cache[b], axis - 1, positions, update[b]))
    return torch.stack(entries)


@register(_LIB, "Unique")
def unique(call: NodeCall, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """ONNX Unique: values (sorted, or in order of first occurrence with ``sorted=0``),
    first indices, inverse indices and counts; along ``axis`` or over the flattened input.

    ``torch.unique`` gives sorted values, inverse and counts; the first index of each value
    is the minimum position mapped to it (``scatter_reduce`` amin).
    """
    axis = call.attr("axis")
    if axis is None:
        x, dim = x.reshape(-1), 0
    else:
        dim = int(axis) % x.ndim
    values, inverse, counts = torch.unique(
        x, sorted=True, return_inverse=True, return_counts=True, dim=dim
    )
    positions = torch.arange(inverse.numel())
    first = torch.full((counts.numel(),), inverse.numel(), dtype=torch.int64)
    first = first.scatter_reduce(0, inverse, positions, "amin")
    if not call.attr("sorted", 1):
        order = torch.argsort(first)
        rank = torch.argsort(order)
        values, first, counts = (
            torch.index_select(values, dim, order),
            first[order],
            counts[order],
        )
        inverse = rank[inverse]
    return values, first, inverse.to(torch.int64), counts.to(torch.int64)
