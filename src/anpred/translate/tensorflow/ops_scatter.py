"""Scatter and selection TensorFlow translators, in ONNX's layout (Unique too).

ScatterElements/Scatter, ScatterND, TensorScatter and MaxUnpool write through
``tf.scatter_nd`` / ``tf.tensor_scatter_nd_update`` (``_add``, ``_max``, ``_min``);
TensorFlow has no scatter with multiplication, so ``reduction="mul"`` is composed as
``x * tf.math.unsorted_segment_prod`` of the updates per target element. Compress,
ReverseSequence and EyeLike use ``tf.gather``, ``tf.reverse_sequence`` and comparisons
of ``tf.range``.
"""

from __future__ import annotations

import numpy as np

from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import onnx_op
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.tensorflow.ops_elementwise import onnx_to_tf_dtype

_SCATTER = {
    "none": tf.tensor_scatter_nd_update,
    "add": tf.tensor_scatter_nd_add,
    "max": tf.tensor_scatter_nd_max,
    "min": tf.tensor_scatter_nd_min,
}


def _wrapped(indices: tf.Tensor, dim: tf.Tensor | int) -> tf.Tensor:
    """Indices as int64 with negative ones counted from the end of an axis of ``dim``."""
    indices = tf.cast(indices, tf.int64)
    return tf.where(indices < 0, indices + tf.cast(dim, tf.int64), indices)


def _scatter_nd(reduction: str, x: tf.Tensor, index: tf.Tensor, updates: tf.Tensor) -> tf.Tensor:
    """Scatter ``updates`` into ``x`` at the full index tuples ``index`` (last axis)."""
    if reduction in _SCATTER:
        return _SCATTER[reduction](x, index, updates)
    if reduction != "mul":
        raise NotImplementedError(f"tensorflow scatter: reduction {reduction!r}")
    # mul: the product of the updates aimed at each element (1 where none), times x.
    depth = int(index.shape[-1])
    shape = tf.shape(x, out_type=tf.int64)
    head = shape[:depth]
    linear = tf.zeros(tf.shape(index)[:-1], tf.int64)
    for k in range(depth):
        linear = linear * head[k] + index[..., k]
    rows = tf.reduce_prod(head)
    tail = shape[depth:]
    flat_u = tf.reshape(updates, tf.concat([[-1], tail], 0))
    factor = tf.math.unsorted_segment_prod(flat_u, tf.reshape(linear, [-1]), rows)
    return x * tf.reshape(factor, shape)


@onnx_op("ScatterElements")
def scatter_elements(
    call: NodeCall, x: tf.Tensor, indices: tf.Tensor, updates: tf.Tensor
) -> tf.Tensor:
    """ONNX ScatterElements along ``axis``; ``reduction`` none, add, mul, max or min.

    Each element of ``indices`` becomes a full index tuple (its own position, with the
    ``axis`` entry replaced by its value) for ``tf.tensor_scatter_nd_*``.
    """
    rank = x.shape.rank
    axis = int(call.attr("axis", 0)) % rank
    index = _wrapped(indices, tf.shape(x, out_type=tf.int64)[axis])
    grids = tf.meshgrid(
        *[tf.range(tf.shape(indices, out_type=tf.int64)[d]) for d in range(rank)], indexing="ij"
    )
    grids[axis] = index
    return _scatter_nd(call.attr("reduction", "none"), x, tf.stack(grids, -1), updates)


onnx_op("Scatter")(scatter_elements)  # deprecated alias (opsets 9-10)


@onnx_op("ScatterND")
def scatter_nd(call: NodeCall, x: tf.Tensor, indices: tf.Tensor, updates: tf.Tensor) -> tf.Tensor:
    """ONNX ScatterND (``tf.tensor_scatter_nd_*``); reduction none, add, mul, max or min."""
    depth = int(indices.shape[-1])
    dims = tf.shape(x, out_type=tf.int64)[:depth]
    index = _wrapped(indices, dims)
    return _scatter_nd(call.attr("reduction", "none"), x, index, updates)


@onnx_op("TensorScatter", since=24)
def tensor_scatter(
    call: NodeCall, cache: tf.Tensor, update: tf.Tensor, write_indices: tf.Tensor | None = None
) -> tf.Tensor:
    """ONNX TensorScatter (a KV-cache write): ``update`` into ``cache`` along ``axis`` from
    each batch entry's write index (``linear``; ``circular`` wraps around).

    The axis is moved next to the batch axis and the (batch, position) pairs are written
    with ``tf.tensor_scatter_nd_update``.
    """
    rank = cache.shape.rank
    axis = int(call.attr("axis", -2)) % rank
    perm = [0, axis, *[d for d in range(1, rank) if d != axis]]
    inverse = [perm.index(d) for d in range(rank)]
    moved_cache = tf.transpose(cache, perm)
    moved_update = tf.transpose(update, perm)
    batch = tf.shape(update, out_type=tf.int64)[0]
    steps = tf.shape(update, out_type=tf.int64)[axis]
    length = tf.shape(cache, out_type=tf.int64)[axis]
    starts = (
        tf.zeros([batch], tf.int64)
        if write_indices is None
        else tf.cast(tf.reshape(write_indices, [-1]), tf.int64)
    )
    positions = starts[:, None] + tf.range(steps)[None, :]
    if call.attr("mode", "linear") == "circular":
        positions = tf.math.floormod(positions, length)
    rows = tf.broadcast_to(tf.range(batch)[:, None], tf.shape(positions))
    index = tf.stack([rows, positions], -1)
    return tf.transpose(tf.tensor_scatter_nd_update(moved_cache, index, moved_update), inverse)


@onnx_op("Compress")
def compress(call: NodeCall, x: tf.Tensor, condition: tf.Tensor) -> tf.Tensor:
    """ONNX Compress: the slices along ``axis`` (of the flattened input without) where true.

    The condition may be shorter than the axis; ``tf.where`` then ``tf.gather``.
    """
    axis = call.attr("axis")
    if axis is None:
        x, axis = tf.reshape(x, [-1]), 0
    axis = int(axis) % x.shape.rank
    chosen = tf.reshape(tf.where(tf.reshape(tf.cast(condition, tf.bool), [-1])), [-1])
    chosen = tf.boolean_mask(chosen, chosen < tf.shape(x, out_type=tf.int64)[axis])
    return tf.gather(x, chosen, axis=axis)


@onnx_op("ReverseSequence")
def reverse_sequence(call: NodeCall, x: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
    """ONNX ReverseSequence: ``tf.reverse_sequence`` of the first ``lengths[i]`` steps."""
    return tf.reverse_sequence(
        x,
        tf.cast(lengths, tf.int64),
        seq_axis=int(call.attr("time_axis", 0)),
        batch_axis=int(call.attr("batch_axis", 1)),
    )


@onnx_op("EyeLike")
def eye_like(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
    """ONNX EyeLike: ones on diagonal ``k`` of a matrix shaped as ``x`` (``dtype``)."""
    dtype = onnx_to_tf_dtype(int(call.attr("dtype"))) if call.attr("dtype") else x.dtype
    shape = tf.shape(x)
    rows = tf.range(shape[0])[:, None]
    cols = tf.range(shape[1])[None, :]
    return tf.cast(tf.equal(cols - rows, int(call.attr("k", 0))), dtype)


def _sorted_order(rows: tf.Tensor, width: int) -> tf.Tensor:
    """Lexicographic order of the rows of a 2-D tensor (stable ``tf.argsort`` per column,
    last column first).
    """
    order = tf.range(tf.shape(rows)[0])
    for column in reversed(range(width)):
        keys = tf.gather(rows[:, column], order)
        order = tf.gather(order, tf.argsort(keys, stable=True))
    return order


@onnx_op("Unique", since=11)
def unique(call: NodeCall, x: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """ONNX Unique: values (sorted, or in order of first occurrence with ``sorted=0``),
    first indices, inverse indices and counts; along ``axis`` or over the flattened input.

    ``tf.raw_ops.UniqueV2`` gives the values in order of first occurrence and the inverse;
    counts and first indices are ``tf.math.unsorted_segment_sum``/``_min`` over it; sorting
    reorders them by the lexicographic order of the values (:func:`_sorted_order`).
    """
    axis = call.attr("axis")
    if axis is None:
        x, axis = tf.reshape(x, [-1]), 0
    axis = int(axis) % x.shape.rank
    moved = tf.experimental.numpy.moveaxis(x, axis, 0)
    values, inverse = tf.raw_ops.UniqueV2(x=moved, axis=tf.constant([0], tf.int64))
    inverse = tf.cast(inverse, tf.int64)
    count = tf.shape(values)[0]
    positions = tf.range(tf.shape(inverse, out_type=tf.int64)[0])
    first = tf.math.unsorted_segment_min(positions, inverse, count)
    counts = tf.math.unsorted_segment_sum(tf.ones_like(positions), inverse, count)
    if call.attr("sorted", 1):
        width = int(np.prod(moved.shape.as_list()[1:], dtype=np.int64))
        order = _sorted_order(tf.reshape(values, [count, width]), width)
        rank = tf.cast(tf.math.invert_permutation(order), tf.int64)
        values, first, counts = (tf.gather(t, order) for t in (values, first, counts))
        inverse = tf.gather(rank, inverse)
    values = tf.experimental.numpy.moveaxis(values, 0, axis)
    return values, first, inverse, counts


@onnx_op("MaxUnpool", since=9)
def max_unpool(
    call: NodeCall, x: tf.Tensor, indices: tf.Tensor, output_shape: tf.Tensor | None = None
) -> tf.Tensor:
    """ONNX MaxUnpool: each value to its flat index (MaxPool's Indices) in a zero tensor
    (``tf.scatter_nd``); the output shape is the ``output_shape`` input when given, else
    ``(in - 1) * stride + kernel - pads``.
    """
    if output_shape is not None:
        shape = tf.cast(tf.reshape(output_shape, [-1]), tf.int64)
    else:
        nd = x.shape.rank - 2
        kernel = [int(k) for k in call.attr("kernel_shape")]
        strides = [int(s) for s in call.attr("strides", [1] * nd)]
        pads = [int(p) for p in call.attr("pads", [0] * (2 * nd))]
        dims = x.shape.as_list()
        shape = tf.constant(
            dims[:2]
            + [
                (n - 1) * s + k - pads[i] - pads[i + nd]
                for i, (n, s, k) in enumerate(zip(dims[2:], strides, kernel, strict=True))
            ],
            tf.int64,
        )
    flat = tf.scatter_nd(
        tf.reshape(tf.cast(indices, tf.int64), [-1, 1]),
        tf.reshape(x, [-1]),
        tf.reduce_prod(shape)[None],
    )
    return tf.reshape(flat, shape)
