"""Detection torch translators: NonMaxSuppression, RoiAlign, DeformConv, on torchvision.

torchvision's operators (``torchvision.ops``) are the kernels torch detection models run.
torchvision is imported when a graph uses one of them (it adds about 5 s to torch's import
here), not when the torch translators are registered.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import torch

from anpred.translate.registry import NodeCall, register

_LIB = "torch"

Tensor = torch.Tensor


def _ops() -> ModuleType:
    """``torchvision.ops``, imported on first use."""
    from torchvision import ops

    return ops


def _scalar(call: NodeCall, index: int, value: Tensor | None, default: float) -> float:
    static = call.const(index)
    if static is not None:
        return float(np.asarray(static).reshape(-1)[0])
    return default if value is None else float(value.reshape(-1)[0])


def _corners(boxes: Tensor, center: bool) -> Tensor:
    """(x1, y1, x2, y2) with x1 <= x2, y1 <= y2, from ONNX's [y1, x1, y2, x2] (any corner
    order) or [x_center, y_center, width, height].
    """
    if center:
        xc, yc, w, h = boxes.unbind(-1)
        return torch.stack([xc - w / 2, yc - h / 2, xc + w / 2, yc + h / 2], -1)
    y1, x1, y2, x2 = boxes.unbind(-1)
    return torch.stack(
        [torch.minimum(x1, x2), torch.minimum(y1, y2), torch.maximum(x1, x2),
         torch.maximum(y1, y2)], -1,
    )  # fmt: skip


@register(_LIB, "NonMaxSuppression")
def non_max_suppression(
    call: NodeCall,
    boxes: Tensor,
    scores: Tensor,
    max_boxes: Tensor | None = None,
    iou_threshold: Tensor | None = None,
    score_threshold: Tensor | None = None,
) -> Tensor:
    """ONNX NonMaxSuppression: ``torchvision.ops.nms`` per batch entry and class.

    Boxes scoring at most ``score_threshold`` are dropped first; at most
    ``max_output_boxes_per_class`` survive per class (0: none). Rows are
    (batch, class, box), int64.
    """
    limit = int(_scalar(call, 2, max_boxes, 0))
    iou = _scalar(call, 3, iou_threshold, 0.0)
    floor = _scalar(call, 4, score_threshold, -np.inf)
    corners = _corners(boxes, bool(call.attr("center_point_box", 0)))
    rows = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            candidates = torch.nonzero(scores[b, c] > floor).reshape(-1)
            kept = _ops().nms(corners[b, candidates], scores[b, c, candidates], iou)
            for box in candidates[kept][:limit].tolist():
                rows.append([b, c, box])
    return torch.tensor(rows, dtype=torch.int64).reshape(-1, 3)


@register(_LIB, "RoiAlign", since=16)
def roi_align(call: NodeCall, x: Tensor, rois: Tensor, batch_indices: Tensor) -> Tensor:
    """ONNX RoiAlign (``mode="avg"``): ``torchvision.ops.roi_align``; ``half_pixel``
    coordinates are torchvision's ``aligned=True``.
    """
    if call.attr("mode", "avg") != "avg":
        raise NotImplementedError("RoiAlign mode=max: torchvision averages only")
    boxes = torch.cat([batch_indices.reshape(-1, 1).to(rois.dtype), rois], dim=1)
    return _ops().roi_align(
        x,
        boxes,
        (int(call.attr("output_height", 1)), int(call.attr("output_width", 1))),
        spatial_scale=float(np.float32(call.attr("spatial_scale", 1.0))),
        sampling_ratio=int(call.attr("sampling_ratio", 0)),
        aligned=call.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel",
    )


@register(_LIB, "DeformConv")
def deform_conv(
    call: NodeCall,
    x: Tensor,
    w: Tensor,
    offset: Tensor,
    b: Tensor | None = None,
    mask: Tensor | None = None,
) -> Tensor:
    """ONNX DeformConv (2-D): ``torchvision.ops.deform_conv2d``; symmetric pads only."""
    pads = list(call.attr("pads", [0, 0, 0, 0]))
    if pads[:2] != pads[2:]:
        raise NotImplementedError("DeformConv with asymmetric pads")
    return _ops().deform_conv2d(
        x,
        offset,
        w,
        bias=b,
        stride=tuple(call.attr("strides", [1, 1])),
        padding=tuple(pads[:2]),
        dilation=tuple(call.attr("dilations", [1, 1])),
        mask=mask,
    )
