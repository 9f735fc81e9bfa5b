"""Block rearrangements: SpaceToDepth, DepthToSpace, LpPool, Col2Im and CenterCropPad.

SpaceToDepth and DepthToSpace in ONNX's default DCR mode are ``tf.nn.space_to_depth`` /
``tf.nn.depth_to_space`` on the NHWC tensor (same channel order); CRD mode is composed of
``tf.reshape`` and ``tf.transpose`` in ONNX's layout. TensorFlow has no p-norm pooling:
LpPool is composed as ``(sum |x|^p)^(1/p)`` with the window sum a ``tf.nn.convolution``
of ``|x|^p`` (channels folded into the batch) with a ones kernel (zero pads count as 0),
at stride 1 then subsampled, since TensorFlow's convolutions refuse strides with dilations.
"""

from __future__ import annotations

import math

import numpy as np

from anpred.errors import AnpredError
from anpred.translate.col2im_positions import col2im_geometry, col2im_positions
from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import TFValue, layout_op, onnx_op, spatial_result
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.tensorflow.policy import NCHW
from anpred.translate.tensorflow.spatial import ceil_extra, node_pads, spatial_attrs


@layout_op("SpaceToDepth")
def space_to_depth(call: NodeCall, x: TFValue) -> TFValue:
    """ONNX SpaceToDepth: blocks to channels (DCR: ``tf.nn.space_to_depth``; CRD composed)."""
    b = int(call.attr("blocksize"))
    if call.attr("mode", "DCR") != "CRD":
        return spatial_result(tf.nn.space_to_depth(x.nhwc(), b))
    t = x.nchw()
    n, c, h, w = t.shape.as_list()
    y = tf.transpose(tf.reshape(t, [-1, c, h // b, b, w // b, b]), [0, 1, 3, 5, 2, 4])
    return TFValue(tf.reshape(y, [-1, c * b * b, h // b, w // b]), NCHW)


@layout_op("DepthToSpace")
def depth_to_space(call: NodeCall, x: TFValue) -> TFValue:
    """ONNX DepthToSpace: channels to blocks (DCR: ``tf.nn.depth_to_space``; CRD composed)."""
    b = int(call.attr("blocksize"))
    if call.attr("mode", "DCR") != "CRD":
        return spatial_result(tf.nn.depth_to_space(x.nhwc(), b))
    t = x.nchw()
    n, c, h, w = t.shape.as_list()
    y = tf.transpose(tf.reshape(t, [-1, c // (b * b), b, b, h, w]), [0, 1, 4, 2, 5, 3])
    return TFValue(tf.reshape(y, [-1, c // (b * b), h * b, w * b]), NCHW)


def _p(call: NodeCall) -> float:
    return float(call.attr("p", 2))


def _root(total: tf.Tensor, p: float) -> tf.Tensor:
    return tf.pow(total, 1.0 / p) if p != 1 else total


@onnx_op("LpPool")
def lp_pool(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
    """ONNX LpPool ``(sum |x|^p)^(1/p)`` over each window (composed, see the module)."""
    p = _p(call)
    kernel = [int(k) for k in call.attr("kernel_shape")]
    n = len(kernel)
    strides, dilations = spatial_attrs(call, n, kernel)
    shape = x.shape.as_list()
    sizes = shape[2:]
    pads = node_pads(call, sizes, kernel, strides, dilations)
    if call.attr("ceil_mode", 0):
        spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
        pads = [
            (b, e + ceil_extra(s, span, st, (b, e)))
            for s, span, st, (b, e) in zip(sizes, spans, strides, pads, strict=True)
        ]
    powered = tf.pow(tf.abs(x), p) if p != 1 else tf.abs(x)
    folded = tf.reshape(powered, [-1, *sizes, 1])  # (N*C, spatial..., 1)
    folded = tf.pad(folded, [[0, 0], *([b, e] for b, e in pads), [0, 0]])
    ones = tf.ones([*kernel, 1, 1], x.dtype)
    total = tf.nn.convolution(folded, ones, strides=1, padding="VALID", dilations=dilations)
    total = total[(slice(None), *(slice(None, None, s) for s in strides))]
    out_sizes = total.shape.as_list()[1:-1]
    y = tf.reshape(total, [-1, shape[1], *out_sizes])
    return _root(y, p)


def _static_ints(call: NodeCall, index: int, what: str) -> list[int]:
    value = call.const(index)
    if value is None:
        raise AnpredError(f"tensorflow {call.op_type}: {what} must be static (node {call.name})")
    return [int(v) for v in np.asarray(value).reshape(-1)]


@onnx_op("Col2Im", since=18)
def col2im(
    call: NodeCall, x: tf.Tensor, image_shape: tf.Tensor, block_shape: tf.Tensor
) -> tf.Tensor:
    """ONNX Col2Im, composed: each column entry is added to its image position with
    ``tf.math.unsorted_segment_sum`` (positions from the static geometry; entries that fall
    in the padding are dropped).
    """
    if call.const(1) is None or call.const(2) is None:
        return _col2im_run_time(call, x, image_shape, block_shape)
    image = _static_ints(call, 1, "image_shape")
    block = _static_ints(call, 2, "block_shape")
    flat, valid = col2im_positions(call, image, block)
    keep = np.flatnonzero(valid.reshape(-1))
    channels = int(x.shape[1]) // math.prod(block)
    columns = tf.reshape(x, [-1, channels, flat.size])  # (N, C, kernel offsets * blocks)
    picked = tf.transpose(tf.gather(columns, keep, axis=2), [2, 0, 1])
    summed = tf.math.unsorted_segment_sum(picked, flat.reshape(-1)[keep], math.prod(image))
    return tf.reshape(tf.transpose(summed, [1, 2, 0]), [-1, channels, *image])


def _col2im_run_time(
    call: NodeCall, x: tf.Tensor, image_shape: tf.Tensor, block_shape: tf.Tensor
) -> tf.Tensor:
    """Col2Im with image and block shapes fed at run time: the same positions as
    :func:`col2im`, computed with ``tf.range``/``tf.meshgrid``.
    """
    nd = int(image_shape.shape[0])
    image = tf.cast(tf.reshape(image_shape, [-1]), tf.int64)
    block = tf.cast(tf.reshape(block_shape, [-1]), tf.int64)
    pads, dilations, strides, counts = col2im_geometry(
        call, [image[i] for i in range(nd)], [block[i] for i in range(nd)]
    )
    offsets = tf.meshgrid(*[tf.range(block[i]) for i in range(nd)], indexing="ij")
    starts = tf.meshgrid(*[tf.range(counts[i]) for i in range(nd)], indexing="ij")
    flat = tf.zeros([1, 1], tf.int64)
    valid = tf.ones([1, 1], tf.bool)
    for i in range(nd):  # (kernel offsets, blocks) -> image position along axis i
        pos = tf.reshape(starts[i], [1, -1]) * strides[i]
        pos = pos + tf.reshape(offsets[i], [-1, 1]) * dilations[i] - pads[i]
        valid = valid & (pos >= 0) & (pos < image[i])
        flat = flat * image[i] + tf.clip_by_value(pos, 0, image[i] - 1)
    keep = tf.reshape(tf.where(tf.reshape(valid, [-1])), [-1])
    taps = tf.reduce_prod(block)
    channels = tf.cast(tf.shape(x, out_type=tf.int64)[1] // taps, tf.int64)
    columns = tf.reshape(x, tf.stack([tf.shape(x, out_type=tf.int64)[0], channels, -1]))
    picked = tf.transpose(tf.gather(columns, keep, axis=2), [2, 0, 1])
    ids = tf.gather(tf.reshape(flat, [-1]), keep)
    summed = tf.math.unsorted_segment_sum(picked, ids, tf.reduce_prod(image))
    out = tf.reshape(tf.transpose(summed, [1, 2, 0]), tf.concat([[-1, channels], image], 0))
    return tf.ensure_shape(out, [None] * (nd + 2))


@onnx_op("CenterCropPad", since=18)
def center_crop_pad(call: NodeCall, x: tf.Tensor, shape: tf.Tensor) -> tf.Tensor:
    """ONNX CenterCropPad: crop (``tf.slice``) and zero-pad (``tf.pad``) each of ``axes``
    (default all) to ``shape`` (static or run-time); a crop starts at
    ``(size - target) // 2``, a pad puts ``(target - size) // 2`` before.
    """
    rank = x.shape.rank
    axes = [int(a) % rank for a in call.attr("axes", range(rank))]
    target = tf.cast(tf.reshape(shape, [-1]), tf.int64)
    sizes = tf.shape(x, out_type=tf.int64)
    begin = [tf.constant(0, tf.int64)] * rank
    length = [tf.constant(-1, tf.int64)] * rank
    pads = [tf.zeros([2], tf.int64)] * rank
    for i, axis in enumerate(axes):
        size, want = sizes[axis], target[i]
        begin[axis] = tf.maximum((size - want) // 2, 0)
        length[axis] = tf.minimum(want, size)
        extra = tf.maximum(want - size, 0)
        pads[axis] = tf.stack([extra // 2, extra - extra // 2])
    cropped = tf.slice(x, tf.stack(begin), tf.stack(length))
    return tf.pad(cropped, tf.stack(pads))
