"""Detection paddle translators: NonMaxSuppression on ``paddle.vision.ops.nms``."""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle

from anpred.translate.paddle.static_values import static_value
from anpred.translate.registry import NodeCall, register

Tensor = Any


def _scalar(call: NodeCall, index: int, value: Tensor, default: float) -> float:
    if value is None:
        return default
    return float(np.asarray(static_value(call, index, "threshold", value)).reshape(-1)[0])


def _corners(boxes: Tensor, center: bool) -> Tensor:
    """(x1, y1, x2, y2) with x1 <= x2, y1 <= y2, from ONNX's [y1, x1, y2, x2] (any corner
    order) or [x_center, y_center, width, height].
    """
    a, b, c, d = paddle.unbind(boxes, axis=-1)
    if center:
        return paddle.stack([a - c / 2, b - d / 2, a + c / 2, b + d / 2], axis=-1)
    return paddle.stack(
        [paddle.minimum(b, d), paddle.minimum(a, c), paddle.maximum(b, d), paddle.maximum(a, c)],
        axis=-1,
    )


@register("paddle", "NonMaxSuppression")
def non_max_suppression(
    call: NodeCall,
    boxes: Tensor,
    scores: Tensor,
    max_boxes: Tensor = None,
    iou_threshold: Tensor = None,
    score_threshold: Tensor = None,
) -> Tensor:
    """ONNX NonMaxSuppression: ``paddle.vision.ops.nms`` per batch entry and class.

    Boxes scoring at most ``score_threshold`` are dropped first; at most
    ``max_output_boxes_per_class`` survive per class (0: none). Rows are
    (batch, class, box), int64.
    """
    limit = int(_scalar(call, 2, max_boxes, 0))
    iou = _scalar(call, 3, iou_threshold, 0.0)
    floor = _scalar(call, 4, score_threshold, -np.inf)
    corners = _corners(boxes, bool(call.attr("center_point_box", 0)))
    rows = []
    for b in range(int(scores.shape[0])):
        for c in range(int(scores.shape[1])):
            candidates = paddle.nonzero(scores[b, c] > floor).numpy().reshape(-1)
            if limit <= 0 or candidates.size == 0:
                continue
            chosen = paddle.to_tensor(candidates)
            kept = paddle.vision.ops.nms(
                paddle.index_select(corners[b], chosen),
                iou,
                scores=paddle.index_select(scores[b, c], chosen),
            )
            for box in candidates[kept.numpy()][:limit].tolist():
                rows.append([b, c, box])
    return paddle.to_tensor(np.asarray(rows, dtype=np.int64).reshape(-1, 3))
