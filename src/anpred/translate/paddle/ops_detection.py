"""Detection paddle translators on ``paddle.vision.ops``: NonMaxSuppression, DeformConv,
RoiAlign.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

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


@register("paddle", "DeformConv")
def deform_conv(
    call: NodeCall, x: Tensor, w: Tensor, offset: Tensor, b: Tensor = None, mask: Tensor = None
) -> Tensor:
    """ONNX DeformConv (2-D): ``paddle.vision.ops.deform_conv2d`` (``offset_group`` is its
    ``deformable_groups``); asymmetric pads are applied first with ``F.pad``. Where paddle
    refuses the offset groups (output channels not divisible by them), one call per
    offset group on its input channels, summed.
    """
    pads = [int(p) for p in call.attr("pads", [0, 0, 0, 0])]
    if pads[:2] != pads[2:]:
        x = F.pad(x, [0, 0, 0, 0, pads[0], pads[2], pads[1], pads[3]], value=0.0)
        pads = [0, 0, 0, 0]
    kwargs = {
        "stride": list(call.attr("strides", [1, 1])),
        "padding": pads[:2],
        "dilation": list(call.attr("dilations", [1, 1])),
    }
    offset_groups, groups = int(call.attr("offset_group", 1)), int(call.attr("group", 1))
    if int(w.shape[0]) % offset_groups == 0 or groups != 1:
        return paddle.vision.ops.deform_conv2d(
            x, offset, w, bias=b, deformable_groups=offset_groups, groups=groups, mask=mask,
            **kwargs,
        )  # fmt: skip
    # paddle's kernel needs the output channels divisible by deformable_groups: the
    # convolution is linear in the input channels, so sum one call per offset group
    parts = [paddle.split(t, offset_groups, axis=1) for t in (x, w, offset)]
    masks = [None] * offset_groups if mask is None else paddle.split(mask, offset_groups, axis=1)
    y = functools.reduce(paddle.add, [
        paddle.vision.ops.deform_conv2d(xg, og, wg, mask=mg, **kwargs)
        for xg, wg, og, mg in zip(*parts, masks, strict=True)
    ])  # fmt: skip
    return y if b is None else y + paddle.reshape(b, [1, -1, 1, 1])


@register("paddle", "RoiAlign", since=16)
def roi_align(call: NodeCall, x: Tensor, rois: Tensor, batch_indices: Tensor) -> Tensor:
    """ONNX RoiAlign (``mode="avg"``): ``paddle.vision.ops.roi_align``; ``half_pixel``
    coordinates are its ``aligned=True``, ``sampling_ratio`` 0 (adaptive) its -1.

    Paddle takes the boxes grouped by image with a count per image: they are sorted by
    batch index (stably) and the results put back in ONNX's order.
    """
    if call.attr("mode", "avg") != "avg":
        raise NotImplementedError("RoiAlign mode=max: paddle's roi_align averages only")
    index = paddle.cast(batch_indices, "int64")
    order = paddle.argsort(index, stable=True)
    counts = paddle.bincount(index, minlength=int(x.shape[0]))
    ratio = int(call.attr("sampling_ratio", 0))
    pooled = paddle.vision.ops.roi_align(
        x,
        paddle.gather(rois, order),
        paddle.cast(counts, "int32"),
        (int(call.attr("output_height", 1)), int(call.attr("output_width", 1))),
        spatial_scale=float(np.float32(call.attr("spatial_scale", 1.0))),
        sampling_ratio=ratio if ratio > 0 else -1,
        aligned=call.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel",
    )
    return paddle.gather(pooled, paddle.argsort(order))
