"""Pooling: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.

MaxPool and AveragePool run ``tf.nn.max_pool`` / ``avg_pool`` channels-last (1-D pools as
2-D on NHWC, 2-D on NHWC, 3-D on NDHWC: ``max_pool3d`` / ``avg_pool3d``); the global
pools are ``tf.reduce_mean`` / ``reduce_max`` over the spatial axes, in any layout.
MaxPool's Indices output comes from ``tf.nn.max_pool_with_argmax`` (2-D, no dilations:
the only argmax-returning pooling TensorFlow has), moved to ONNX's flat NCHW index.

ONNX pads become TensorFlow's ``"SAME"`` where they coincide with it, else an explicit
``tf.pad`` (``-inf`` for max, zeros for average) before a ``"VALID"`` sweep: XLA does not
compile pooling with explicit paddings. Average pools whose divisor differs from what a
TensorFlow kernel computes (``count_include_pad=0`` with non-SAME pads, ``ceil_mode``
windows that leave the padded input) divide the window sum by the window's element count,
both computed with ``avg_pool``; dilated average pools (TensorFlow's have no dilations)
sum the strided views of the kernel taps for both.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

import numpy as np

from anpred.errors import AnpredError
from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import TFValue, layout_op, spatial_result
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.tensorflow.policy import NCHW, NHWC
from anpred.translate.tensorflow.spatial import (
    Pads,
    ceil_extra,
    node_pads,
    same_pads,
    spatial_attrs,
)


def _window(call: NodeCall, sizes: list[int]) -> tuple[list[int], list[int], list[int], Pads, Pads]:
    """Return kernel, strides, dilations, node pads and pads with ``ceil_mode``'s extra end."""
    kernel = [int(k) for k in call.attr("kernel_shape")]
    strides, dilations = spatial_attrs(call, len(kernel), kernel)
    if any(s is None for s in sizes):
        raise AnpredError(
            f"tensorflow {call.op_type}: needs static spatial sizes (node {call.name})"
        )
    pads = node_pads(call, sizes, kernel, strides, dilations)
    full = list(pads)
    if call.attr("ceil_mode", 0):
        spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
        full = [
            (b, e + ceil_extra(s, span, st, (b, e)))
            for s, span, st, (b, e) in zip(sizes, spans, strides, pads, strict=True)
        ]
    return kernel, strides, dilations, pads, full


def _as_2d(call: NodeCall, x: TFValue) -> tuple[tf.Tensor, list[int], int]:
    """Channels-last tensor of a pooling input, its ONNX spatial sizes, and the input rank.

    1-D inputs become NHWC with height 1, 2-D ones NHWC, 3-D ones NDHWC.
    """
    if x.rank == 4:
        return x.nhwc(), [int(s) for s in x.onnx_shape()[2:]], 4
    if x.rank == 3:
        t = tf.transpose(tf.expand_dims(x.nchw(), 2), (0, 2, 3, 1))
        return t, [int(x.tensor.shape[2])], 3
    if x.rank == 5:
        return tf.transpose(x.nchw(), (0, 2, 3, 4, 1)), [int(s) for s in x.onnx_shape()[2:]], 5
    raise AnpredError(
        f"tensorflow {call.op_type}: only 1-D, 2-D and 3-D pooling is translated (node {call.name})"
    )


def _finish(y: tf.Tensor, rank: int) -> TFValue:
    if rank == 3:
        return TFValue(tf.transpose(tf.squeeze(y, 1), (0, 2, 1)), NCHW)
    if rank == 5:
        return TFValue(tf.transpose(y, (0, 4, 1, 2, 3)), NCHW)
    return spatial_result(y)


def _pad(x: tf.Tensor, pads: Pads, value: float) -> tf.Tensor:
    return tf.pad(x, [[0, 0], *([b, e] for b, e in pads), [0, 0]], constant_values=value)


@layout_op("MaxPool")
def max_pool(call: NodeCall, x: TFValue) -> TFValue:
    """ONNX MaxPool (kernel, strides, pads, auto_pad, ceil_mode, dilations, Indices)."""
    t, sizes, rank = _as_2d(call, x)
    one_d = rank == 3
    kernel, strides, dilations, _, full = _window(call, sizes)
    if len(call.output_shapes) > 1:
        return _max_pool_with_indices(call, t, rank, kernel, strides, dilations, full)
    if one_d:
        kernel, strides, sizes = [1, *kernel], [1, *strides], [1, *sizes]
        dilations, full = [1, *dilations], [(0, 0), *full]
    lowest = -np.inf if t.dtype.is_floating else t.dtype.min
    if any(d != 1 for d in dilations):
        if any(p != (0, 0) for p in full):
            t = _pad(t, full, lowest)
        return _finish(_dilated_max_pool(t, kernel, strides, dilations), rank)
    if all(p == (0, 0) for p in full):
        padding = "VALID"
    elif full == [same_pads(s, k, st) for s, k, st in zip(sizes, kernel, strides, strict=True)]:
        padding = "SAME"
    else:
        t, padding = _pad(t, full, lowest), "VALID"
    return _finish(tf.nn.max_pool(t, kernel, strides, padding), rank)


def _max_pool_with_indices(
    call: NodeCall,
    t: tf.Tensor,
    rank: int,
    kernel: list[int],
    strides: list[int],
    dilations: list[int],
    full: Pads,
) -> list[TFValue]:
    """MaxPool and its Indices with ``tf.nn.max_pool_with_argmax`` on the padded NHWC input.

    TensorFlow's argmax is the flat index ``((b * H' + y) * W' + x) * C + c`` into the
    (``-inf``-padded) input; integer TensorFlow ops move it to ONNX's
    ``((b * C + c) * H + h) * W + w`` of the unpadded input (``w * H + h`` within the plane
    with ``storage_order`` 1).
    """
    if rank != 4 or any(d != 1 for d in dilations):
        raise AnpredError(
            f"tensorflow MaxPool: the Indices output needs tf.nn.max_pool_with_argmax, which "
            f"pools 2-D NHWC windows without dilations (node {call.name})"
        )
    height, width, channels = (int(s) for s in t.shape[1:])
    padded = _pad(t, full, -np.inf) if any(p != (0, 0) for p in full) else t
    y, argmax = tf.nn.max_pool_with_argmax(
        padded, kernel, strides, "VALID", include_batch_in_index=True
    )
    padded_w = width + full[1][0] + full[1][1]
    padded_h = height + full[0][0] + full[0][1]
    c = argmax % channels
    rest = argmax // channels
    col = rest % padded_w - full[1][0]
    rest = rest // padded_w
    row = rest % padded_h - full[0][0]
    b = rest // padded_h
    plane = col * height + row if call.attr("storage_order", 0) else row * width + col
    index = (b * channels + c) * (height * width) + plane
    return [_finish(y, rank), _finish(tf.cast(index, tf.int64), rank)]


def _views(
    t: tf.Tensor, kernel: list[int], strides: list[int], dilations: list[int]
) -> list[tf.Tensor]:
    """The strided views of a padded channels-last tensor, one per (dilated) kernel tap."""
    outs = [
        (int(size) - (k - 1) * d - 1) // s + 1
        for size, k, s, d in zip(t.shape[1:-1], kernel, strides, dilations, strict=True)
    ]
    views = []
    for taps in itertools.product(*(range(k) for k in kernel)):
        index = [slice(None)]
        for tap, d, s, n in zip(taps, dilations, strides, outs, strict=True):
            index.append(slice(tap * d, tap * d + (n - 1) * s + 1, s))
        views.append(t[(*index, slice(None))])
    return views


def _dilated_max_pool(
    t: tf.Tensor, kernel: list[int], strides: list[int], dilations: list[int]
) -> tf.Tensor:
    """Max-pool a padded NHWC tensor with dilated VALID windows.

    With unit strides this is ``tf.nn.pool`` (dilation by space-to-batch); TensorFlow has no
    kernel for strided dilated pooling, which takes the maximum of the ``kh * kw`` strided
    views instead.
    """
    if all(s == 1 for s in strides):
        return tf.nn.pool(t, kernel, "MAX", strides=strides, padding="VALID", dilations=dilations)
    return functools.reduce(tf.maximum, _views(t, kernel, strides, dilations))


@layout_op("AveragePool")
def average_pool(call: NodeCall, x: TFValue) -> TFValue:
    """ONNX AveragePool (pads, auto_pad, ceil_mode, count_include_pad)."""
    t, sizes, rank = _as_2d(call, x)
    kernel, strides, dilations, pads, full = _window(call, sizes)
    if rank == 3:
        kernel, strides, sizes = [1, *kernel], [1, *strides], [1, *sizes]
        pads, full, dilations = [(0, 0), *pads], [(0, 0), *full], [1, *dilations]
    include_pad = bool(call.attr("count_include_pad", 0))
    same = [same_pads(s, k, st) for s, k, st in zip(sizes, kernel, strides, strict=True)]
    dilated = any(d != 1 for d in dilations)
    if dilated:
        y = _masked_average(t, sizes, kernel, strides, pads, full, include_pad, dilations)
    elif all(p == (0, 0) for p in full):
        y = tf.nn.avg_pool(t, kernel, strides, "VALID")
    elif not include_pad and full == same:
        y = tf.nn.avg_pool(t, kernel, strides, "SAME")
    elif include_pad and full == pads:
        y = tf.nn.avg_pool(_pad(t, full, 0), kernel, strides, "VALID")
    else:
        y = _masked_average(t, sizes, kernel, strides, pads, full, include_pad)
    return _finish(y, rank)


def _masked_average(
    t: tf.Tensor,
    sizes: list[int],
    kernel: list[int],
    strides: list[int],
    pads: Pads,
    full: Pads,
    include_pad: bool,
    dilations: list[int] | None = None,
) -> tf.Tensor:
    """Window sum / number of counted elements (a mask pooled like the input).

    Undilated both are ``avg_pool`` window means (the same k*k factor cancels); dilated
    (TensorFlow's average pools have no dilations) both are sums of the strided views.
    """
    counted = [(s + b + e) if include_pad else s for s, (b, e) in zip(sizes, pads, strict=True)]
    mask_pads = [
        (0, fe - e) if include_pad else (fb, fe)
        for (_, e), (fb, fe) in zip(pads, full, strict=True)
    ]
    mask = _pad(tf.ones([1, *counted, 1], t.dtype), mask_pads, 0)
    padded = _pad(t, full, 0)
    if dilations is None:
        total = tf.nn.avg_pool(padded, kernel, strides, "VALID")
        count = tf.nn.avg_pool(mask, kernel, strides, "VALID")
    else:
        total = functools.reduce(tf.add, _views(padded, kernel, strides, dilations))
        count = functools.reduce(tf.add, _views(mask, kernel, strides, dilations))
    return total / count


def _global(
    reduce: Callable[..., tf.Tensor],
) -> Callable[[NodeCall, TFValue], TFValue]:
    def translate(call: NodeCall, x: TFValue) -> TFValue:
        if x.layout == NHWC:
            return TFValue(reduce(x.tensor, axis=[1, 2], keepdims=True), NHWC)
        return TFValue(reduce(x.tensor, axis=list(range(2, x.rank)), keepdims=True), NCHW)

    return translate


layout_op("GlobalAveragePool")(_global(tf.reduce_mean))
layout_op("GlobalMaxPool")(_global(tf.reduce_max))
