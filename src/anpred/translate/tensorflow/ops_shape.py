"""Shape manipulation: Reshape, Flatten, Squeeze, Unsqueeze, Expand, Tile, Transpose ...

All work in ONNX's layout except Transpose, which folds an NHWC input's layout into its
permutation (one transpose instead of two).
"""

from __future__ import annotations

import numpy as np

from anpred.errors import AnpredError
from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow import policy
from anpred.translate.tensorflow.layout import TO_NCHW, TFValue, layout_op, normalize_axis, onnx_op
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.tensorflow.policy import NCHW, NHWC


def _static_ints(call: NodeCall, index: int, what: str) -> list[int]:
    value = call.const(index)
    if value is None:
        raise AnpredError(f"tensorflow {call.op_type}: {what} must be static (node {call.name})")
    return [int(v) for v in np.asarray(value).reshape(-1)]


@onnx_op("Reshape", since=5)
def reshape(call: NodeCall, x: tf.Tensor, shape: tf.Tensor) -> tf.Tensor:
    """``tf.reshape``; ``0`` copies the input dimension (unless ``allowzero``), ``-1`` infers."""
    if call.const(1) is None:  # fed at run time: 0 still copies the input dimension
        if call.attr("allowzero", 0) or shape.shape.rank != 1 or shape.shape[0] is None:
            return tf.reshape(x, shape)
        rank, length = int(x.shape.rank), int(shape.shape[0])
        dims = tf.shape(x, out_type=shape.dtype)[: min(rank, length)]
        if length > rank:
            dims = tf.concat([dims, shape[rank:]], 0)
        return tf.reshape(x, tf.where(tf.equal(shape, 0), dims, shape))
    target = _static_ints(call, 1, "the shape")
    if not call.attr("allowzero", 0):
        dims = x.shape.as_list()
        target = [
            (dims[i] if dims[i] is not None else tf.shape(x)[i]) if d == 0 else d
            for i, d in enumerate(target)
        ]
    return tf.reshape(x, target)


@onnx_op("Flatten")
def flatten(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
    """Reshape to ``(prod(shape[:axis]), prod(shape[axis:]))``."""
    rank = int(x.shape.rank)
    axis = int(call.attr("axis", 1))
    axis = axis + rank if axis < 0 else axis
    leading = x.shape[:axis]
    if leading.is_fully_defined():
        rows = int(np.prod(leading.as_list(), dtype=np.int64))
    else:
        rows = tf.reduce_prod(tf.shape(x)[:axis])
    return tf.reshape(x, tf.stack([rows, -1]) if isinstance(rows, tf.Tensor) else [rows, -1])


def _axes(call: NodeCall, has_axes_input: bool) -> list[int] | None:
    """Axes of Squeeze/Unsqueeze: an input from opset 13 on, an attribute before."""
    if call.opset >= 13:
        return _static_ints(call, 1, "axes") if has_axes_input else None
    attr = call.attr("axes")
    return None if attr is None else [int(a) for a in attr]


@onnx_op("Squeeze")
def squeeze(call: NodeCall, x: tf.Tensor, axes: tf.Tensor | None = None) -> tf.Tensor:
    """``tf.squeeze`` of the given axes (all size-1 axes when none are given); axes fed at
    run time drop their dimensions from the shape (``tf.reshape``).
    """
    if axes is not None and call.opset >= 13 and call.const(1) is None:
        rank = int(x.shape.rank)
        drop = tf.math.floormod(tf.cast(tf.reshape(axes, [-1]), tf.int64), rank)
        hit = tf.reduce_any(tf.equal(tf.range(rank, dtype=tf.int64)[:, None], drop[None]), 1)
        shape = tf.boolean_mask(tf.shape(x, out_type=tf.int64), tf.logical_not(hit))
        return tf.ensure_shape(tf.reshape(x, shape), [None] * (rank - int(axes.shape[0])))
    wanted = _axes(call, axes is not None)
    if not wanted:
        return tf.squeeze(x)
    rank = int(x.shape.rank)
    return tf.squeeze(x, axis=sorted(normalize_axis(a, rank) for a in wanted))


@onnx_op("Unsqueeze")
def unsqueeze(call: NodeCall, x: tf.Tensor, axes: tf.Tensor | None = None) -> tf.Tensor:
    """Insert size-1 axes at the given positions of the output (``tf.reshape`` to a
    computed shape when the axes are fed at run time).
    """
    if axes is not None and call.opset >= 13 and call.const(1) is None:
        out_rank = int(x.shape.rank) + int(axes.shape[0])
        new = tf.math.floormod(tf.cast(tf.reshape(axes, [-1]), tf.int64), out_rank)
        hit = tf.reduce_any(tf.equal(tf.range(out_rank, dtype=tf.int64)[:, None], new[None]), 1)
        source = tf.cumsum(tf.cast(tf.logical_not(hit), tf.int64)) - 1
        dims = tf.gather(tf.shape(x, out_type=tf.int64), tf.maximum(source, 0))
        return tf.reshape(x, tf.where(hit, tf.ones_like(dims), dims))
    wanted = _axes(call, axes is not None) or []
    out_rank = int(x.shape.rank) + len(wanted)
    for axis in sorted(normalize_axis(a, out_rank) for a in wanted):
        x = tf.expand_dims(x, axis)
    return x


@onnx_op("Expand")
def expand(call: NodeCall, x: tf.Tensor, shape: tf.Tensor) -> tf.Tensor:
    """``tf.broadcast_to`` the bidirectional broadcast of the input shape and ``shape``."""
    if call.const(1) is not None and x.shape.is_fully_defined():
        target = np.broadcast_shapes(tuple(x.shape.as_list()), tuple(_static_ints(call, 1, "")))
        return tf.broadcast_to(x, target)
    target = tf.broadcast_dynamic_shape(tf.shape(x, out_type=tf.int64), tf.cast(shape, tf.int64))
    return tf.broadcast_to(x, target)


@onnx_op("Tile")
def tile(call: NodeCall, x: tf.Tensor, repeats: tf.Tensor) -> tf.Tensor:
    """``tf.tile``."""
    if call.const(1) is not None:
        return tf.tile(x, _static_ints(call, 1, "repeats"))
    return tf.tile(x, repeats)


@layout_op("Transpose")
def transpose(call: NodeCall, x: TFValue) -> TFValue:
    """``tf.transpose``; an NHWC input's layout is composed into the permutation."""
    perm = call.attr("perm")
    perm = list(reversed(range(x.rank))) if perm is None else [int(p) for p in perm]
    if x.layout == NHWC:
        perm = [TO_NCHW[p] for p in perm]
    return TFValue(tf.transpose(x.tensor, perm), NCHW)


@onnx_op("ConstantOfShape")
def constant_of_shape(call: NodeCall, shape: tf.Tensor) -> tf.Tensor:
    """``tf.fill``; a float value takes the graph's float dtype."""
    value = call.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    dtype = policy.current().tf_float if value.dtype.kind == "f" else tf.as_dtype(value.dtype)
    dims = _static_ints(call, 0, "") if call.const(0) is not None else shape
    return tf.fill(dims, tf.constant(value.reshape(-1)[0], dtype))


@onnx_op("Range")
def range_(call: NodeCall, start: tf.Tensor, limit: tf.Tensor, delta: tf.Tensor) -> tf.Tensor:
    """``tf.range`` (one-element operands, as expanded functions pass, taken as scalars)."""
    return tf.range(*(tf.reshape(v, []) for v in (start, limit, delta)))
