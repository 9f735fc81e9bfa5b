"""Data-dependent jax translators: NonMaxSuppression and Unique.

Their output sizes depend on the input values, which ``jax.jit`` (XLA compiles static
shapes) cannot express: they translate when their inputs are known while tracing -- the
adapter's ``jit=False`` mode, or constants -- and otherwise stop with a one-line error.
NonMaxSuppression computes IoUs with ``jnp`` and selects greedily in Python over the
scores in descending order (stable); Unique is ``jnp.unique``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from anpred.errors import UsageError
from anpred.translate.jax.numerics import index_dtype
from anpred.translate.jax.registration import register
from anpred.translate.registry import NodeCall


def _value(call: NodeCall, index: int, value: Any) -> np.ndarray | None:
    """Input ``index`` as a NumPy array (``None`` when absent); it must be known now."""
    if call.const(index) is not None:
        return np.asarray(call.const(index))
    if value is None:
        return None
    if isinstance(value, jax.core.Tracer):
        raise UsageError(
            f"{call.op_type} node {call.name}: its output size depends on the input values, "
            "which jax.jit cannot compile (XLA has static shapes); run jax with jit off"
        )
    return np.asarray(value)


def _corners(boxes: Any, center: bool) -> Any:
    """(y1, x1, y2, x2) with y1 <= y2, x1 <= x2 from ONNX's corners (any order) or centers."""
    if center:
        xc, yc, w, h = (boxes[..., i] for i in range(4))
        return jnp.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], -1)
    y1, x1, y2, x2 = (boxes[..., i] for i in range(4))
    return jnp.stack(
        [jnp.minimum(y1, y2), jnp.minimum(x1, x2), jnp.maximum(y1, y2), jnp.maximum(x1, x2)], -1
    )


def _iou(boxes: Any) -> Any:
    """Pairwise intersection over union of (n, 4) corner boxes (0 where the union is 0)."""
    top = jnp.maximum(boxes[:, None, 0], boxes[None, :, 0])
    left = jnp.maximum(boxes[:, None, 1], boxes[None, :, 1])
    bottom = jnp.minimum(boxes[:, None, 2], boxes[None, :, 2])
    right = jnp.minimum(boxes[:, None, 3], boxes[None, :, 3])
    inter = jnp.clip(bottom - top, 0) * jnp.clip(right - left, 0)
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    union = area[:, None] + area[None, :] - inter
    return jnp.where(union > 0, inter / jnp.where(union > 0, union, 1), 0)


@register("NonMaxSuppression")
def non_max_suppression(
    call: NodeCall,
    boxes: Any,
    scores: Any,
    max_boxes: Any = None,
    iou_threshold: Any = None,
    score_threshold: Any = None,
) -> Any:
    """ONNX NonMaxSuppression per batch entry and class: boxes scoring above
    ``score_threshold`` in descending score order, each kept unless its IoU with a kept
    box exceeds ``iou_threshold``; at most ``max_output_boxes_per_class`` (0: none).
    Rows are (batch, class, box).
    """
    box_values, score_values = _value(call, 0, boxes), _value(call, 1, scores)
    given = _value(call, 2, max_boxes)
    limit = 0 if given is None else int(given.reshape(-1)[0])
    given = _value(call, 3, iou_threshold)
    iou_limit = 0.0 if given is None else float(given.reshape(-1)[0])
    given = _value(call, 4, score_threshold)
    floor = -np.inf if given is None else float(given.reshape(-1)[0])
    corners = _corners(jnp.asarray(box_values), bool(call.attr("center_point_box", 0)))
    rows = []
    for b in range(score_values.shape[0]):
        overlaps = np.asarray(_iou(corners[b]))
        for c in range(score_values.shape[1]):
            row = score_values[b, c]
            order = [int(i) for i in np.argsort(-row, kind="stable") if row[i] > floor]
            kept: list[int] = []
            for i in order:
                if len(kept) >= limit:
                    break
                if all(overlaps[i, k] <= iou_limit for k in kept):
                    kept.append(i)
            rows.extend([b, c, i] for i in kept)
    return jnp.asarray(np.asarray(rows, np.int64).reshape(-1, 3), dtype=index_dtype())


@register("Unique")
def unique(call: NodeCall, x: Any) -> tuple[Any, Any, Any, Any]:
    """ONNX Unique: values (sorted, or in order of first occurrence with ``sorted=0``),
    first indices, inverse indices and counts; along ``axis`` or over the flattened input.
    """
    values = _value(call, 0, x)
    axis = call.attr("axis")
    if axis is None:
        values, axis = values.reshape(-1), 0
    axis = int(axis) % values.ndim
    found, first, inverse, counts = jnp.unique(
        jnp.asarray(values), return_index=True, return_inverse=True, return_counts=True,
        axis=axis,
    )  # fmt: skip
    inverse = inverse.reshape(-1)
    if not call.attr("sorted", 1):
        order = jnp.argsort(first, stable=True)
        rank = jnp.argsort(order, stable=True)
        found, first, counts = jnp.take(found, order, axis=axis), first[order], counts[order]
        inverse = rank[inverse]
    dtype = index_dtype()
    return found, first.astype(dtype), inverse.astype(dtype), counts.astype(dtype)
