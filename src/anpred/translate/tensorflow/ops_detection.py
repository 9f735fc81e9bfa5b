"""Detection TensorFlow translators: NonMaxSuppression (``tf.image.non_max_suppression``)."""

from __future__ import annotations

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
