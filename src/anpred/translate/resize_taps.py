"""ONNX Resize as separable filter taps, for the variants no library kernel implements.

Resize is separable: every resized axis maps output index ``i`` to a source coordinate
(``coordinate_transformation_mode``) and reads ``n`` neighbouring input elements with
weights from the mode's kernel (nearest, linear, cubic with ``cubic_coeff_a``, their
``antialias`` versions stretched by ``1 / scale`` when downsampling, ``exclude_outside``).
Which elements and which weights depend only on static shapes and attributes, so this module
computes them at translation time (float64, transcribing ONNX's reference evaluator,
``onnx/reference/ops/op_resize.py``, ``_interpolate_1d_along_axis``); the interpolation
itself (a gather of the taps, a product with the weights, a sum over the taps) runs in the
library's own kernels (:func:`tap_layout` says how each translator applies them).

It also resolves the geometry every translator needs (:func:`plan`): ``axes``,
``keep_aspect_ratio_policy`` and ``tf_crop_and_resize``'s ``roi``. Imports no DL library.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from anpred.errors import UsageError
from anpred.translate.registry import NodeCall


@dataclass(frozen=True)
class AxisTaps:
    """The filter of one resized axis.

    Attributes:
        axis: The axis (ONNX order).
        index: ``(out, n)`` int64 input indices of every output element's taps (clamped to
            the input, as ONNX's edge padding reads).
        weight: ``(out, n)`` float64 weights.
        extrapolated: ``(out,)`` bool, output positions outside the input
            (``tf_crop_and_resize``: they take ``extrapolation_value``), or ``None``.
    """

    axis: int
    index: np.ndarray
    weight: np.ndarray
    extrapolated: np.ndarray | None


@dataclass(frozen=True)
class ResizePlan:
    """Output geometry of a Resize node.

    Attributes:
        out_shape: Output shape (every axis).
        scales: Scale of every axis (given, derived from sizes, or the aspect-keeping one).
        roi: ``roi`` start/end of every axis (``tf_crop_and_resize``), or ``None``.
        axes: The axes the node resizes (``axes`` attribute, or all).
    """

    out_shape: tuple[int, ...]
    scales: tuple[float, ...]
    roi: tuple[tuple[float, float], ...] | None
    axes: tuple[int, ...]

    def resized(self, in_shape: Sequence[int]) -> list[int]:
        """The axes whose length or scale changes (or that a roi crops)."""
        out = []
        for axis in self.axes:
            crop = self.roi is not None and self.roi[axis] != (0.0, 1.0)
            same = self.out_shape[axis] == in_shape[axis] and math.isclose(self.scales[axis], 1.0)
            if crop or not same:
                out.append(axis)
        return out


def _present(value: np.ndarray | None) -> np.ndarray | None:
    if value is None:
        return None
    value = np.asarray(value).reshape(-1)
    return value if value.size else None


def plan(
    call: NodeCall,
    in_shape: Sequence[int],
    roi: np.ndarray | None,
    scales: np.ndarray | None,
    sizes: np.ndarray | None,
) -> ResizePlan:
    """Resolve a Resize node's output geometry (ONNX's ``_interpolate_nd``).

    Args:
        call: The node (``axes``, ``keep_aspect_ratio_policy``).
        in_shape: Static input shape, ONNX order.
        roi: Static ``roi`` input, or ``None``.
        scales: Static ``scales`` input, or ``None``.
        sizes: Static ``sizes`` input, or ``None``.

    Raises:
        UsageError: Without static scales or sizes.
    """
    rank = len(in_shape)
    axes = [int(a) % rank for a in call.attr("axes", range(rank))]
    scales, sizes, roi = _present(scales), _present(sizes), _present(roi)
    out = [int(d) for d in in_shape]
    factors = [1.0] * rank
    if sizes is not None:
        for i, axis in enumerate(axes):
            out[axis] = int(sizes[i])
            factors[axis] = out[axis] / in_shape[axis]
        policy = call.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            chosen = [factors[a] for a in axes]
            scale = min(chosen) if policy == "not_larger" else max(chosen)
            for axis in axes:
                factors[axis] = scale
                out[axis] = int(scale * in_shape[axis] + 0.5)  # ONNX: round half up
    elif scales is not None:
        for i, axis in enumerate(axes):
            factors[axis] = float(scales[i])
            out[axis] = math.floor(in_shape[axis] * factors[axis])
    else:
        raise UsageError(f"Resize node {call.name} needs static scales or sizes")
    full_roi = None
    if roi is not None and call.attr("coordinate_transformation_mode") == "tf_crop_and_resize":
        pairs = [(0.0, 1.0)] * rank
        for i, axis in enumerate(axes):
            pairs[axis] = (float(roi[i]), float(roi[len(axes) + i]))
        full_roi = tuple(pairs)
    return ResizePlan(tuple(out), tuple(factors), full_roi, tuple(axes))


def _source(
    mode: str, n_in: int, n_out: int, scale: float, roi: tuple[float, float] | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Source coordinate of every output index, and the extrapolated positions."""
    y = np.arange(n_out, dtype=np.float64)
    length = scale * n_in
    if mode == "align_corners":
        return (np.zeros(n_out) if length == 1 else y * (n_in - 1) / (length - 1)), None
    if mode == "asymmetric":
        return y / scale, None
    if mode == "tf_crop_and_resize":
        start, end = roi if roi is not None else (0.0, 1.0)
        if length == 1:
            x = np.full(n_out, (end - start) * (n_in - 1) / 2)
        else:
            x = y * (end - start) * (n_in - 1) / (length - 1)
        x = x + start * (n_in - 1)
        return x, (x < 0) | (x > n_in - 1)
    if mode == "pytorch_half_pixel":
        return (np.full(n_out, -0.5) if length == 1 else (y + 0.5) / scale - 0.5), None
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / length)
        return offset + (y + 0.5) / scale - 0.5, None
    if mode == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale, None
    raise UsageError(f"Resize coordinate_transformation_mode {mode!r} is unknown")


def _nearest(ratio: float, rule: str) -> np.ndarray:
    if ratio == 1.0:
        return np.array([0.0, 1.0])
    prefer_low = {
        "round_prefer_floor": ratio <= 0.5,
        "round_prefer_ceil": ratio < 0.5,
        "floor": True,
        "ceil": False,
    }
    if rule not in prefer_low:
        raise UsageError(f"Resize nearest_mode {rule!r} is unknown")
    low = prefer_low[rule]
    return np.array([float(low), float(not low)])


def _cubic(ratio: float, a: float) -> np.ndarray:
    r = ratio
    return np.array([
        ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
        ((a + 2) * r - (a + 3)) * r * r + 1,
        ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
        ((a * ((1 - r) + 1) - 5 * a) * ((1 - r) + 1) + 8 * a) * ((1 - r) + 1) - 4 * a,
    ])  # fmt: skip


def _cubic_antialias(ratio: float, scale: float, a: float) -> np.ndarray:
    scale = min(scale, 1.0)
    start = int(np.floor(-2 / scale) + 1)
    x = np.abs(scale * (np.arange(start, 2 - start) - ratio))
    inner = ((a + 2) * x - (a + 3)) * x * x + 1
    outer = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    coeffs = np.where(x <= 1, inner, np.where(x < 2, outer, 0.0))
    return coeffs / coeffs.sum()


def _linear_antialias(ratio: float, scale: float) -> np.ndarray:
    scale = min(scale, 1.0)
    start = int(np.floor(-1 / scale) + 1)
    x = (np.arange(start, 2 - start) - ratio) * scale
    coeffs = np.clip(1 - np.abs(x), 0, 1)
    return coeffs / coeffs.sum()


def _coefficients(call: NodeCall, ratio: float, scale: float) -> np.ndarray:
    mode = call.attr("mode", "nearest")
    antialias = bool(call.attr("antialias", 0))
    if mode == "nearest":
        return _nearest(ratio, call.attr("nearest_mode", "round_prefer_floor"))
    if mode == "linear":
        return _linear_antialias(ratio, scale) if antialias else np.array([1 - ratio, ratio])
    if mode == "cubic":
        a = float(call.attr("cubic_coeff_a", -0.75))
        return _cubic_antialias(ratio, scale, a) if antialias else _cubic(ratio, a)
    raise UsageError(f"Resize mode {mode!r} of node {call.name} is unknown")


def axis_taps(call: NodeCall, resize: ResizePlan, in_shape: Sequence[int], axis: int) -> AxisTaps:
    """The taps of one resized axis (ONNX reference ``_interpolate_1d_along_axis``).

    Args:
        call: The node (mode, coordinates, rounding, cubic coefficient, antialias,
            exclude_outside).
        resize: The node's geometry (:func:`plan`).
        in_shape: Input shape, ONNX order.
        axis: The axis.
    """
    n_in, n_out, scale = int(in_shape[axis]), resize.out_shape[axis], resize.scales[axis]
    roi = None if resize.roi is None else resize.roi[axis]
    coords_mode = call.attr("coordinate_transformation_mode", "half_pixel")
    x, extrapolated = _source(coords_mode, n_in, n_out, scale, roi)
    low = np.floor(x)
    ratios = np.where(x == low, 1.0, x - low)  # ONNX prefers the left pixel: ratio in (0, 1]
    coeffs = np.stack([_coefficients(call, float(r), scale) for r in ratios])
    n = coeffs.shape[1]
    pad = math.ceil(n / 2)
    padded = x + pad
    base = np.floor(padded)
    frac = padded - base
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    index = (base + offset).astype(np.int64)[:, None] + np.arange(n)[None, :] - pad
    if call.attr("exclude_outside", 0):
        coeffs = np.where((index < 0) | (index >= n_in), 0.0, coeffs)
        total = coeffs.sum(axis=1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    if extrapolated is not None and not extrapolated.any():
        extrapolated = None
    return AxisTaps(axis, np.clip(index, 0, n_in - 1), coeffs, extrapolated)


def tap_layout(taps: AxisTaps, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """The flat gather indices and the broadcastable weights of ``taps``.

    A translator gathers ``index`` (``out * n`` entries) along the axis, reshapes the result
    so the axis becomes ``(out, n)``, multiplies by ``weight`` (shaped to broadcast, float64:
    cast it to the tensor's dtype) and sums over the tap axis (``taps.axis + 1``).
    """
    out, n = taps.index.shape
    shape = [1] * (rank + 1)
    shape[taps.axis], shape[taps.axis + 1] = out, n
    return taps.index.reshape(-1), taps.weight.reshape(shape)


def split_shape(shape: Sequence[int], taps: AxisTaps) -> list[int]:
    """Shape of the gathered tensor with the axis split into ``(out, n)``."""
    out, n = taps.index.shape
    return [*shape[: taps.axis], out, n, *shape[taps.axis + 1 :]]


def extrapolation_mask(taps: AxisTaps, rank: int) -> np.ndarray | None:
    """``taps.extrapolated`` shaped to broadcast along the axis, or ``None``."""
    if taps.extrapolated is None:
        return None
    shape = [1] * rank
    shape[taps.axis] = taps.extrapolated.size
    return taps.extrapolated.reshape(shape)
