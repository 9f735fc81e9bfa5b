"""Indexing and joining: Concat, Split, Slice, Pad and Gather.

Concat, Split, Slice and Pad follow an NHWC input's layout (their axes are remapped);
Gather works in ONNX's layout.
"""

from __future__ import annotations

import math

import numpy as np

from anpred.errors import AnpredError
from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import (
    TO_NHWC,
    TFValue,
    layout_op,
    nhwc_axis,
    normalize_axis,
    onnx_op,
)
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.tensorflow.policy import NCHW, NHWC


def _static(call: NodeCall, index: int, what: str) -> list[int]:
    value = call.const(index)
    if value is None:
        raise AnpredError(f"tensorflow {call.op_type}: {what} must be static (node {call.name})")
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _tensor_axis(value: TFValue, axis: int) -> int:
    """Where (normalized) ONNX ``axis`` of ``value`` lives in its tensor."""
    return nhwc_axis(axis) if value.layout == NHWC else axis


@layout_op("Concat")
def concat(call: NodeCall, *values: TFValue) -> TFValue:
    """``tf.concat``; in NHWC when a 4-D input is NHWC."""
    rank = values[0].rank
    axis = normalize_axis(int(call.attr("axis")), rank)
    if rank == 4 and any(v.layout == NHWC for v in values):
        return TFValue(tf.concat([v.nhwc() for v in values], nhwc_axis(axis)), NHWC)
    return TFValue(tf.concat([v.nchw() for v in values], axis), NCHW)


@layout_op("Split")
def split(call: NodeCall, x: TFValue, sizes: TFValue | None = None) -> tuple[TFValue, ...]:
    """``tf.split`` by sizes (input from opset 13, attribute before) or into equal parts."""
    axis = normalize_axis(int(call.attr("axis", 0)), x.rank)
    if call.opset >= 13 and sizes is not None and call.const(1) is None:
        count = len(call.output_shapes)  # sizes fed at run time: split in ONNX's layout
        pieces = tf.split(x.nchw(), tf.reshape(sizes.tensor, [-1]), axis, num=count)
        return tuple(TFValue(p, NCHW) for p in pieces)
    if call.opset >= 13:
        parts = _static(call, 1, "split sizes") if sizes is not None else None
    else:
        attr = call.attr("split")
        parts = None if attr is None else [int(s) for s in attr]
    if parts is None:
        count = int(call.attr("num_outputs", len(call.output_shapes)))
        dim = x.onnx_shape()[axis]
        if dim is not None and dim % count:
            chunk = math.ceil(dim / count)  # opset 18: the last part is smaller
            parts = [chunk] * (count - 1) + [dim - chunk * (count - 1)]
    pieces = tf.split(x.tensor, parts if parts is not None else count, _tensor_axis(x, axis))
    return tuple(TFValue(p, x.layout) for p in pieces)


def _bounds(start: int, end: int, step: int, dim: int) -> slice:
    """ONNX Slice bounds for one axis as a Python slice of a tensor with ``dim`` entries."""
    if step == 0:
        raise AnpredError("tensorflow Slice: step 0")
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    return slice(start, None if end == -1 else end, step)


@layout_op("Slice")
def slice_(
    call: NodeCall,
    x: TFValue,
    starts_input: TFValue | None = None,
    ends_input: TFValue | None = None,
    axes_input: TFValue | None = None,
    steps_input: TFValue | None = None,
) -> TFValue:
    """Strided slice with ONNX's clamping (negative and huge bounds, negative steps)."""
    if call.opset >= 10:
        dynamic = [call.const(i) is None and v is not None for i, v in enumerate(
            (x, starts_input, ends_input, axes_input, steps_input)) if i]  # fmt: skip
        if any(dynamic):
            return _dynamic_slice(call, x, starts_input, ends_input, axes_input, steps_input)
        starts = _static(call, 1, "starts")
        ends = _static(call, 2, "ends")
        axes = _static(call, 3, "axes") if axes_input is not None else None
        steps = _static(call, 4, "steps") if steps_input is not None else None
    else:
        starts = [int(s) for s in call.attr("starts")]
        ends = [int(e) for e in call.attr("ends")]
        axes = call.attr("axes")
        steps = None
    axes = list(range(len(starts))) if axes is None else [int(a) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    shape = x.onnx_shape()
    index = [slice(None)] * x.rank
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        axis = normalize_axis(axis, x.rank)
        if shape[axis] is None and starts_input is not None:
            return _dynamic_slice(call, x, starts_input, ends_input, axes_input, steps_input)
        if shape[axis] is None:
            raise AnpredError(f"tensorflow Slice: needs static sizes (node {call.name})")
        index[_tensor_axis(x, axis)] = _bounds(start, end, step, int(shape[axis]))
    return TFValue(x.tensor[tuple(index)], x.layout)


def _dynamic_slice(
    call: NodeCall,
    x: TFValue,
    starts_input: TFValue | None,
    ends_input: TFValue | None,
    axes_input: TFValue | None,
    steps_input: TFValue | None,
) -> TFValue:
    """Slice with run-time starts, ends, axes or steps: ``tf.strided_slice`` of the
    ONNX-layout tensor, the bounds clamped as ONNX says (computed as tensors).
    """
    t = x.nchw()
    rank = x.rank
    dims = tf.shape(t, out_type=tf.int64)
    starts = tf.cast(tf.reshape(starts_input.tensor, [-1]), tf.int64)  # type: ignore[union-attr]
    ends = tf.cast(tf.reshape(ends_input.tensor, [-1]), tf.int64)  # type: ignore[union-attr]
    if axes_input is None:
        axes = tf.range(tf.size(starts, out_type=tf.int64))
    else:
        axes = tf.math.floormod(tf.cast(tf.reshape(axes_input.tensor, [-1]), tf.int64), rank)
    if steps_input is None:
        steps = tf.ones_like(starts)
    else:
        steps = tf.cast(tf.reshape(steps_input.tensor, [-1]), tf.int64)
    dim = tf.gather(dims, axes)
    first = tf.where(starts < 0, starts + dim, starts)
    last = tf.where(ends < 0, ends + dim, ends)
    forward = steps > 0
    first = tf.where(forward, tf.clip_by_value(first, 0, dim), tf.clip_by_value(first, 0, dim - 1))
    last = tf.where(forward, tf.clip_by_value(last, 0, dim), tf.clip_by_value(last, -1, dim - 1))
    last = tf.where(tf.logical_and(~forward, last < 0), -dim - 1, last)  # through index 0
    where = axes[:, None]
    begin = tf.tensor_scatter_nd_update(tf.zeros([rank], tf.int64), where, first)
    end = tf.tensor_scatter_nd_update(dims, where, last)
    stride = tf.tensor_scatter_nd_update(tf.ones([rank], tf.int64), where, steps)
    y = tf.strided_slice(t, begin, end, stride)
    return TFValue(tf.ensure_shape(y, [None] * rank), NCHW)


@onnx_op("Gather")
def gather(call: NodeCall, data: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
    """``tf.gather``; negative indices count from the end, as ONNX allows."""
    axis = normalize_axis(int(call.attr("axis", 0)), int(data.shape.rank))
    static = call.const(1)
    dim = data.shape[axis]
    if static is not None and dim is not None:
        static = np.asarray(static)
        return tf.gather(data, tf.constant(np.where(static < 0, static + dim, static)), axis=axis)
    size = tf.shape(data, out_type=indices.dtype)[axis]
    return tf.gather(data, tf.where(indices < 0, indices + size, indices), axis=axis)


_PAD_MODES = {"constant": "CONSTANT", "reflect": "REFLECT"}


@layout_op("Pad")
def pad(
    call: NodeCall,
    x: TFValue,
    pads: TFValue | None = None,
    value: TFValue | None = None,
    axes: TFValue | None = None,
) -> TFValue:
    """``tf.pad`` (constant, reflect); negative pads crop. NHWC inputs stay NHWC."""
    mode = call.attr("mode", "constant")
    if mode not in _PAD_MODES:
        raise AnpredError(f"tensorflow Pad: mode {mode!r} is not translated (node {call.name})")
    rank = x.rank
    if call.opset >= 11 and call.const(1) is None and mode == "constant":
        return _dynamic_pad(call, x, pads, value, axes)
    if call.opset >= 11:
        amounts = _static(call, 1, "pads")
        pad_axes = _static(call, 3, "axes") if axes is not None else list(range(rank))
        fill = 0 if value is None else tf.cast(tf.reshape(value.tensor, []), x.dtype)
    else:
        amounts = [int(p) for p in call.attr("pads")]
        pad_axes = list(range(rank))
        fill = float(call.attr("value", 0.0))
    n = len(pad_axes)
    onnx_pads = [(0, 0)] * rank
    for i, axis in enumerate(pad_axes):
        onnx_pads[normalize_axis(axis, rank)] = (amounts[i], amounts[i + n])
    tensor_pads = [onnx_pads[TO_NHWC[k]] for k in range(4)] if x.layout == NHWC else onnx_pads
    t = x.tensor
    if any(b < 0 or e < 0 for b, e in tensor_pads):
        t = t[tuple(slice(max(-b, 0), (e if e < 0 else None)) for b, e in tensor_pads)]
    grow = [[max(b, 0), max(e, 0)] for b, e in tensor_pads]
    if mode == "constant":
        t = tf.pad(t, grow, mode="CONSTANT", constant_values=fill)
    else:
        t = tf.pad(t, grow, mode=_PAD_MODES[mode])
    return TFValue(t, x.layout)


def _dynamic_pad(
    call: NodeCall, x: TFValue, pads: TFValue | None, value: TFValue | None, axes: TFValue | None
) -> TFValue:
    """Constant Pad by run-time (non-negative) amounts on the ONNX-layout tensor (static axes)."""
    rank = x.rank
    pad_axes = _static(call, 3, "axes") if axes is not None else list(range(rank))
    amounts = tf.cast(tf.reshape(pads.tensor, [2, -1]), tf.int64)  # type: ignore[union-attr]
    zero = tf.zeros([2], tf.int64)
    rows = [zero] * rank
    for i, axis in enumerate(pad_axes):
        rows[normalize_axis(axis, rank)] = amounts[:, i]
    fill = 0 if value is None else tf.cast(tf.reshape(value.tensor, []), x.dtype)
    return TFValue(tf.pad(x.nchw(), tf.stack(rows), constant_values=fill), NCHW)
