"""Detection TensorFlow translators: NonMaxSuppression (``tf.image.non_max_suppression``)
and RoiAlign (composed: TensorFlow's ``crop_and_resize`` samples one point per bin).
"""

from __future__ import annotations

import numpy as np

from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import onnx_op
from anpred.translate.tensorflow.lean_import import tf


def _scalar(value: tf.Tensor | None, default: float, dtype: tf.DType) -> tf.Tensor:
    if value is None:
        return tf.constant(default, dtype)
    return tf.cast(tf.reshape(value, [-1])[0], dtype)


def _corners(boxes: tf.Tensor, center: bool) -> tf.Tensor:
    """[y1, x1, y2, x2] (any corner order, as TensorFlow accepts) from ONNX's boxes."""
    if not center:
        return boxes
    xc, yc, w, h = tf.unstack(boxes, axis=-1)
    return tf.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], -1)


@onnx_op("NonMaxSuppression", since=10)
def non_max_suppression(
    call: NodeCall,
    boxes: tf.Tensor,
    scores: tf.Tensor,
    max_boxes: tf.Tensor | None = None,
    iou_threshold: tf.Tensor | None = None,
    score_threshold: tf.Tensor | None = None,
) -> tf.Tensor:
    """ONNX NonMaxSuppression: ``tf.image.non_max_suppression`` per batch entry and class.

    Boxes scoring at most ``score_threshold`` are dropped; at most
    ``max_output_boxes_per_class`` survive per class (0: none). Rows are
    (batch, class, box), int64.
    """
    limit = _scalar(max_boxes, 0, tf.int32)
    iou = _scalar(iou_threshold, 0.0, tf.float32)
    floor = _scalar(score_threshold, float("-inf"), tf.float32)
    corners = tf.cast(_corners(boxes, bool(call.attr("center_point_box", 0))), tf.float32)
    scores32 = tf.cast(scores, tf.float32)
    rows = []
    for b in range(int(scores.shape[0])):
        for c in range(int(scores.shape[1])):
            kept = tf.image.non_max_suppression(corners[b], scores32[b, c], limit, iou, floor)
            kept = tf.cast(kept, tf.int64)
            ids = tf.fill(tf.shape(kept), tf.constant(b, tf.int64))
            classes = tf.fill(tf.shape(kept), tf.constant(c, tf.int64))
            rows.append(tf.stack([ids, classes, kept], -1))
    if not rows:
        return tf.zeros([0, 3], tf.int64)
    return tf.concat(rows, 0)


def _axis_samples(
    start: tf.Tensor, length: tf.Tensor, bins: int, ratio: int, size: int
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """Bilinear taps of the sample points along one axis of every RoI: low and high index,
    their weights, and whether the point reads the image at all; shapes (R, bins * ratio).
    """
    step = length / bins
    offsets = (np.arange(bins)[:, None] + (np.arange(ratio)[None, :] + 0.5) / ratio).reshape(-1)
    p = start[:, None] + step[:, None] * tf.constant(offsets, start.dtype)[None]
    inside = (p >= -1.0) & (p <= size)
    p = tf.maximum(p, 0.0)
    low = tf.floor(p)
    edge = low >= size - 1
    low = tf.where(edge, tf.fill(tf.shape(low), float(size - 1)), low)
    p = tf.where(edge, low, p)
    high = tf.where(edge, low, low + 1)
    frac = p - low
    return tf.cast(low, tf.int64), tf.cast(high, tf.int64), 1 - frac, frac, inside


@onnx_op("RoiAlign", since=16)
def roi_align(call: NodeCall, x: tf.Tensor, rois: tf.Tensor, batch_indices: tf.Tensor) -> tf.Tensor:
    """ONNX RoiAlign (``mode="avg"``, ``sampling_ratio`` > 0), composed: the bilinear value
    (neighbours read with ``tf.gather``) at ``ratio x ratio`` points of every bin, averaged;
    ``half_pixel`` shifts the RoI by half a pixel and does not widen it to at least 1.
    """
    if call.attr("mode", "avg") != "avg":
        raise NotImplementedError("tensorflow RoiAlign: mode=max is not translated")
    ratio = int(call.attr("sampling_ratio", 0))
    if ratio <= 0:
        raise NotImplementedError("tensorflow RoiAlign: adaptive sampling_ratio (0)")
    out_h, out_w = int(call.attr("output_height", 1)), int(call.attr("output_width", 1))
    half_pixel = call.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    height, width = (int(d) for d in x.shape.as_list()[2:])
    scale = float(np.float32(call.attr("spatial_scale", 1.0)))
    boxes = rois * scale - (0.5 if half_pixel else 0.0)
    x1, y1, x2, y2 = tf.unstack(boxes, axis=1)
    roi_w, roi_h = x2 - x1, y2 - y1
    if not half_pixel:
        roi_w, roi_h = tf.maximum(roi_w, 1.0), tf.maximum(roi_h, 1.0)
    yl, yh, wyl, wyh, y_in = _axis_samples(y1, roi_h, out_h, ratio, height)
    xl, xh, wxl, wxh, x_in = _axis_samples(x1, roi_w, out_w, ratio, width)
    images = tf.gather(x, tf.cast(batch_indices, tf.int64))  # (R, C, H, W)
    channels = int(x.shape[1])
    flat = tf.reshape(images, [-1, channels, height * width])
    valid = tf.cast(y_in[:, :, None] & x_in[:, None, :], x.dtype)  # (R, Ph, Pw)
    total = None
    for yi, wy in ((yl, wyl), (yh, wyh)):
        for xi, wx in ((xl, wxl), (xh, wxh)):
            index = tf.reshape(yi[:, :, None] * width + xi[:, None, :], [tf.shape(rois)[0], -1])
            picked = tf.gather(flat, index, axis=2, batch_dims=1)  # (R, C, Ph * Pw)
            weight = tf.reshape(wy[:, :, None] * wx[:, None, :] * valid, [tf.shape(rois)[0], 1, -1])
            term = picked * weight
            total = term if total is None else total + term
    grid = tf.reshape(total, [-1, channels, out_h, ratio, out_w, ratio])
    return tf.reduce_mean(grid, axis=[3, 5])
