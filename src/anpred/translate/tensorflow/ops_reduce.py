"""Reductions and Softmax; on NHWC values they reduce along the remapped axes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from anpred.errors import AnpredError
from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import (
    TFValue,
    layout_op,
    nhwc_axis,
    normalize_axis,
)
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.tensorflow.policy import NCHW, NHWC

#: First opset in which each reduction takes ``axes`` as an input instead of an attribute.
_AXES_INPUT_SINCE = {"ReduceSum": 13}


def _axes(call: NodeCall, rank: int, has_axes_input: bool) -> list[int] | None:
    """Return the static reduction axes, normalized; ``None`` for "all axes", ``[]`` for "none"."""
    if call.opset >= _AXES_INPUT_SINCE.get(call.op_type, 18):
        axes = None
        if has_axes_input:
            if call.const(1) is None:
                raise AnpredError(
                    f"tensorflow {call.op_type}: axes must be static (node {call.name})"
                )
            axes = [int(a) for a in np.asarray(call.const(1)).reshape(-1)]
    else:
        attr = call.attr("axes")
        axes = None if attr is None else [int(a) for a in attr]
    if axes is not None and not axes:
        axes = None
    if axes is None:
        return [] if call.attr("noop_with_empty_axes", 0) else None
    return sorted(normalize_axis(a, rank) for a in axes)


def _axes_are_input(call: NodeCall) -> bool:
    return call.opset >= _AXES_INPUT_SINCE.get(call.op_type, 18)


def _dynamic_reduce(
    call: NodeCall, reduce: Callable[..., tf.Tensor], x: TFValue, axes_input: TFValue
) -> TFValue:
    """Reduce over run-time ``axes`` (a tensor) in ONNX's layout; empty axes reduce every
    axis, or none with ``noop_with_empty_axes`` (``tf.cond`` on the axes' size).
    """
    rank = x.rank
    axes = tf.math.floormod(tf.cast(tf.reshape(axes_input.nchw(), [-1]), tf.int64), rank)
    if not call.attr("noop_with_empty_axes", 0):
        everything = tf.range(rank, dtype=tf.int64)
        axes = tf.cond(tf.size(axes) > 0, lambda: axes, lambda: everything)
    keepdims = bool(call.attr("keepdims", 1))
    return TFValue(reduce(x.nchw(), axis=axes, keepdims=keepdims), NCHW)


def _register_reduce(op_type: str, reduce: Callable[..., tf.Tensor]) -> None:
    @layout_op(op_type)
    def translate(call: NodeCall, x: TFValue, axes_input: TFValue | None = None) -> TFValue:
        if axes_input is not None and call.const(1) is None and _axes_are_input(call):
            return _dynamic_reduce(call, reduce, x, axes_input)
        axes = _axes(call, x.rank, axes_input is not None)
        if axes == []:
            return TFValue(tf.identity(x.tensor), x.layout)
        if axes is None:
            axes = list(range(x.rank))
        keepdims = bool(call.attr("keepdims", 1))
        if x.layout == NHWC:
            y = TFValue(reduce(x.tensor, axis=[nhwc_axis(a) for a in axes], keepdims=True), NHWC)
            if keepdims:
                return y
            return TFValue(tf.squeeze(y.nchw(), axis=axes), NCHW)
        return TFValue(reduce(x.tensor, axis=axes, keepdims=keepdims), NCHW)

    translate.__name__ = f"translate_{op_type.lower()}"


_register_reduce("ReduceMean", tf.math.reduce_mean)
_register_reduce("ReduceSum", tf.math.reduce_sum)
_register_reduce("ReduceMax", tf.math.reduce_max)
_register_reduce("ReduceMin", tf.math.reduce_min)
_register_reduce("ReduceProd", tf.math.reduce_prod)
_register_reduce("ReduceLogSumExp", tf.math.reduce_logsumexp)
_register_reduce("ReduceL2", tf.math.reduce_euclidean_norm)
_register_reduce("ReduceL1", lambda t, **kw: tf.math.reduce_sum(tf.math.abs(t), **kw))
_register_reduce("ReduceSumSquare", lambda t, **kw: tf.math.reduce_sum(tf.math.square(t), **kw))
_register_reduce("ReduceLogSum", lambda t, **kw: tf.math.log(tf.math.reduce_sum(t, **kw)))


def _register_softmax(op_type: str, fn: Callable[..., tf.Tensor]) -> None:
    @layout_op(op_type)
    def translate(call: NodeCall, x: TFValue) -> TFValue:
        rank = x.rank
        if call.opset >= 13:
            axis = normalize_axis(int(call.attr("axis", -1)), rank)
            if x.layout == NHWC:
                return TFValue(fn(x.tensor, axis=nhwc_axis(axis)), NHWC)
            return TFValue(fn(x.tensor, axis=axis), NCHW)
        # before opset 13: the input is coerced to 2-D at ``axis`` (default 1)
        axis = normalize_axis(int(call.attr("axis", 1)), rank)
        t = x.nchw()
        shape = tf.shape(t)
        flat = tf.reshape(t, [int(np.prod(t.shape[:axis], dtype=np.int64)), -1])
        return TFValue(tf.reshape(fn(flat, axis=-1), shape), NCHW)

    translate.__name__ = f"translate_{op_type.lower()}"


_register_softmax("Softmax", tf.nn.softmax)
_register_softmax("LogSoftmax", tf.nn.log_softmax)
