"""Resize / Upsample of the spatial axes (NCHW), with ``paddle.nn.functional.interpolate``.

Supported variants (the others raise :class:`~anpred.errors.UsageError`):

* ``nearest`` with any ``coordinate_transformation_mode`` but ``tf_crop_and_resize``
  (``half_pixel``, ``half_pixel_symmetric``, ``pytorch_half_pixel``, ``align_corners``,
  ``asymmetric``, ``tf_half_pixel_for_nn``) and any ``nearest_mode``
  (``round_prefer_floor``, ``round_prefer_ceil``, ``floor``, ``ceil``). ``asymmetric`` /
  ``floor`` at integer upsampling factors (what torch's ``Upsample(mode="nearest")``
  exports) runs paddle's nearest kernel with ``align_corners=False``, which maps output
  index ``i`` to ``floor(i / scale)``. Every other variant gathers
  (``paddle.index_select``) along each resized axis, with the source indices computed at
  translation time from the static shapes (float64, the ONNX formulas, then rounding and
  clipping to ``[0, in - 1]``); exact, since the gather only selects.
* ``linear`` with ``half_pixel`` / ``pytorch_half_pixel`` (paddle ``align_mode=0``),
  ``asymmetric`` (``align_mode=1``) or ``align_corners``; ``half_pixel_symmetric`` and
  outputs of length 1 (where paddle's kernel reads coordinate 0) run as one gather of both
  neighbours and a weighted sum per axis (:func:`_linear_gather`); ``half_pixel`` is the
  one mode whose ONNX coordinate for a length-1 output is not 0.
* ``cubic`` (2-D, ``cubic_coeff_a=-0.75``, no ``exclude_outside``) with the same
  coordinate modes as linear.

Scales are handed to paddle as ``scale_factor`` (paddle then maps coordinates with
``1 / scale``, as ONNX does) and sizes as ``size`` (ratio ``in / out``, as ONNX does).

The variants paddle's kernels do not implement run as separable filter taps
(:mod:`anpred.translate.resize_taps`; ``paddle.index_select``, a product and a sum per
axis): ``axes``, ``antialias`` (paddle's ``interpolate`` has none), a
``keep_aspect_ratio_policy`` other than ``stretch``, ``tf_crop_and_resize``, and cubic
other than paddle's bicubic (``cubic_coeff_a`` -0.75, no ``exclude_outside``, 4-D,
``half_pixel`` / ``pytorch_half_pixel`` / ``align_corners``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

from anpred.errors import UsageError
from anpred.translate.paddle.static_values import optional_value
from anpred.translate.registry import NodeCall, register
from anpred.translate.resize_taps import (
    axis_taps,
    extrapolation_mask,
    plan,
    split_shape,
    tap_layout,
)

Tensor = Any

_LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}
_LAYOUT = {1: "NCW", 2: "NCHW", 3: "NCDHW"}

#: ONNX ``nearest_mode``: the source index of a (float64) source coordinate.
_ROUNDING = {
    "round_prefer_floor": lambda c: np.ceil(c - 0.5),
    "round_prefer_ceil": lambda c: np.floor(c + 0.5),
    "floor": np.floor,
    "ceil": np.ceil,
}


def _source_coords(
    call: NodeCall, coordinates: str, n_in: int, n_out: int, scale: float
) -> np.ndarray:
    """Source coordinate of every output index along one axis (ONNX transformation modes).

    ``length`` is the unrounded resized length ``n_in * scale`` (the ONNX reference
    evaluator's ``output_width``; ``n_out`` itself when sizes are given).
    """
    x = np.arange(n_out, dtype=np.float64)
    length = n_in * scale
    if coordinates == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if coordinates == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / length)
        return offset + (x + 0.5) / scale - 0.5
    if coordinates == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if length > 1 else np.zeros_like(x)
    if coordinates == "align_corners":
        return x * (n_in - 1) / (length - 1) if length != 1 else np.zeros_like(x)
    if coordinates == "asymmetric":
        return x / scale
    if coordinates == "tf_half_pixel_for_nn":
        return (x + 0.5) / scale
    raise UsageError(
        f"node {call.name}: Resize coordinate_transformation_mode {coordinates!r} is not translated"
    )


def _nearest_gather(
    call: NodeCall,
    x: Tensor,
    out_sizes: list[int],
    scales: list[float],
    coordinates: str,
    nearest_mode: str,
) -> Tensor:
    """Nearest Resize as one ``paddle.index_select`` per resized spatial axis.

    Args:
        call: The node.
        x: The NC... input.
        out_sizes: Output size of every spatial axis.
        scales: Scale of every spatial axis (given, or ``out / in`` for sizes).
        coordinates: ONNX ``coordinate_transformation_mode``.
        nearest_mode: ONNX ``nearest_mode``.
    """
    if nearest_mode not in _ROUNDING:
        raise UsageError(f"node {call.name}: Resize nearest_mode {nearest_mode!r} is unknown")
    in_sizes = list(x.shape[2:])
    for axis, (n_in, n_out, scale) in enumerate(zip(in_sizes, out_sizes, scales, strict=True)):
        if n_in == n_out and scale == 1.0:
            continue
        coords = _source_coords(call, coordinates, n_in, n_out, scale)
        index = np.clip(_ROUNDING[nearest_mode](coords), 0, n_in - 1).astype(np.int64)
        x = paddle.index_select(x, paddle.to_tensor(index), axis=axis + 2)
    return x


def _linear_gather(
    call: NodeCall, x: Tensor, out_sizes: list[int], scales: list[float], coordinates: str
) -> Tensor:
    """Linear Resize, one axis at a time: two ``paddle.index_select`` and a weighted sum.

    For the variants paddle's interpolation kernel maps differently from ONNX: an output
    length of 1 (the kernel then reads source coordinate 0, ONNX keeps the half-pixel
    formula: ``test_resize_downsample_scales_linear`` of ONNX's backend tests) and
    ``half_pixel_symmetric``. The source coordinates, their neighbours and weights are
    computed at translation time from the static shapes (float64, the ONNX formulas,
    coordinates clipped to ``[0, in - 1]``); the interpolation itself runs in paddle.
    """
    in_sizes = list(x.shape[2:])
    rank = len(x.shape)
    for axis, (n_in, n_out, scale) in enumerate(zip(in_sizes, out_sizes, scales, strict=True)):
        if n_in == n_out and scale == 1.0:
            continue
        coords = np.clip(_source_coords(call, coordinates, n_in, n_out, scale), 0, n_in - 1)
        low = np.floor(coords).astype(np.int64)
        high = np.minimum(low + 1, n_in - 1)
        shape = [1] * rank
        shape[axis + 2] = n_out
        weight = paddle.to_tensor((coords - low).reshape(shape), dtype=x.dtype)
        below = paddle.index_select(x, paddle.to_tensor(low), axis=axis + 2)
        above = paddle.index_select(x, paddle.to_tensor(high), axis=axis + 2)
        x = below + (above - below) * weight
    return x


def _by_taps(
    call: NodeCall,
    x: Tensor,
    roi: np.ndarray | None,
    scales: np.ndarray | None,
    sizes: np.ndarray | None,
) -> Tensor:
    """Resize as separable filter taps: ``index_select``, product and sum per resized axis."""
    shape = [int(d) for d in x.shape]
    geometry = plan(call, shape, roi, scales, sizes)
    fill = float(call.attr("extrapolation_value", 0.0))
    for axis in geometry.resized(shape):
        taps = axis_taps(call, geometry, [int(d) for d in x.shape], axis)
        index, weight = tap_layout(taps, len(shape))
        gathered = paddle.index_select(x, paddle.to_tensor(index), axis=axis)
        gathered = paddle.reshape(gathered, split_shape([int(d) for d in x.shape], taps))
        x = paddle.sum(gathered * paddle.to_tensor(weight, dtype=x.dtype), axis=axis + 1)
        mask = extrapolation_mask(taps, len(shape))
        if mask is not None:
            full = paddle.full_like(x, fill)
            x = paddle.where(paddle.to_tensor(np.broadcast_to(mask, x.shape).copy()), full, x)
    return x


def _needs_taps(call: NodeCall, rank: int, coordinates: str) -> bool:
    """Whether no paddle kernel (nor the gathers above) computes the node's variant."""
    if (
        call.attr("antialias", 0)
        or call.attr("axes") is not None
        or call.attr("keep_aspect_ratio_policy", "stretch") != "stretch"
        or coordinates == "tf_crop_and_resize"
    ):
        return True
    if call.attr("mode", "nearest") != "cubic":
        return False
    bicubic = call.attr("cubic_coeff_a", -0.75) == -0.75 and not call.attr("exclude_outside", 0)
    native = coordinates in ("align_corners", "half_pixel", "pytorch_half_pixel")
    return not (bicubic and native and rank == 2)


def _resize(
    call: NodeCall,
    x: Tensor,
    roi: np.ndarray | None,
    scales: np.ndarray | None,
    sizes: np.ndarray | None,
    mode: str,
    coordinates: str,
    nearest_mode: str,
) -> Tensor:
    rank = len(x.shape) - 2
    if call.opset >= 11 and _needs_taps(call, rank, coordinates):
        if (scales is None or not scales.size) and (sizes is None or not sizes.size):
            raise UsageError(f"node {call.name}: Resize needs static scales or sizes")
        return _by_taps(call, x, roi, scales, sizes)
    if rank not in _LINEAR:
        raise UsageError(f"node {call.name}: Resize of a {rank + 2}-D tensor is not translated")
    kwargs: dict[str, Any] = {"data_format": _LAYOUT[rank]}
    in_sizes = list(x.shape[2:])
    if sizes is not None and sizes.size:
        sizes = [int(s) for s in sizes.reshape(-1)]
        if sizes[:2] != list(x.shape[:2]):
            raise UsageError(f"node {call.name}: Resize of batch or channel axes")
        kwargs["size"] = sizes[2:]
        out_sizes = sizes[2:]
        factors = [o / i for o, i in zip(out_sizes, in_sizes, strict=True)]
    elif scales is not None and scales.size:
        scales = [float(s) for s in scales.reshape(-1)]
        if scales[:2] != [1.0, 1.0]:
            raise UsageError(f"node {call.name}: Resize of batch or channel axes")
        kwargs["scale_factor"] = scales[2:]
        factors = scales[2:]
        out_sizes = [math.floor(i * f) for i, f in zip(in_sizes, factors, strict=True)]
    else:
        raise UsageError(f"node {call.name}: Resize needs static scales or sizes")

    if mode == "nearest":
        integer = all(f == int(f) and f >= 1 for f in factors)
        if coordinates == "asymmetric" and nearest_mode == "floor" and integer:
            return F.interpolate(x, mode="nearest", align_corners=False, **kwargs)
        return _nearest_gather(call, x, out_sizes, factors, coordinates, nearest_mode)
    if mode == "linear":
        shrunk_to_one = any(o == 1 < i for o, i in zip(out_sizes, in_sizes, strict=True))
        if coordinates == "half_pixel_symmetric" or (coordinates == "half_pixel" and shrunk_to_one):
            return _linear_gather(call, x, out_sizes, factors, coordinates)
        paddle_mode = _LINEAR[rank]
    elif mode == "cubic" and rank == 2:
        if call.attr("cubic_coeff_a", -0.75) != -0.75 or call.attr("exclude_outside", 0):
            raise UsageError(f"node {call.name}: cubic Resize needs a=-0.75, no exclude_outside")
        paddle_mode = "bicubic"
    else:
        raise UsageError(f"node {call.name}: Resize mode {mode!r} ({rank}-D) is not translated")
    if coordinates == "align_corners":
        return F.interpolate(x, mode=paddle_mode, align_corners=True, **kwargs)
    if coordinates in ("half_pixel", "pytorch_half_pixel"):
        return F.interpolate(x, mode=paddle_mode, align_corners=False, align_mode=0, **kwargs)
    if coordinates == "asymmetric" and mode == "linear":
        return F.interpolate(x, mode=paddle_mode, align_corners=False, align_mode=1, **kwargs)
    raise UsageError(f"node {call.name}: {mode} Resize with {coordinates} is not translated")


@register("paddle", "Resize", since=10)
def resize_10(call: NodeCall, x: Tensor, scales: Tensor) -> Tensor:
    """ONNX Resize opset 10 (static scales input; asymmetric coordinates)."""
    return _resize(
        call,
        x,
        None,
        optional_value(call, 1, scales),
        None,
        call.attr("mode", "nearest"),
        "asymmetric",
        "floor",
    )


@register("paddle", "Resize", since=11)
def resize(
    call: NodeCall, x: Tensor, roi: Tensor = None, scales: Tensor = None, sizes: Tensor = None
) -> Tensor:
    """ONNX Resize opset 11+ (static scales or sizes input; roi unused by these modes)."""
    return _resize(
        call,
        x,
        optional_value(call, 1, roi),
        optional_value(call, 2, scales),
        optional_value(call, 3, sizes),
        call.attr("mode", "nearest"),
        call.attr("coordinate_transformation_mode", "half_pixel"),
        call.attr("nearest_mode", "round_prefer_floor"),
    )


@register("paddle", "Upsample", since=7)
def upsample(call: NodeCall, x: Tensor, scales: Tensor = None) -> Tensor:
    """ONNX Upsample (deprecated; scales attribute in opset 7, input from opset 9)."""
    static = (
        optional_value(call, 1, scales) if scales is not None else np.asarray(call.attr("scales"))
    )
    mode = call.attr("mode", "nearest")
    return _resize(call, x, None, static, None, mode, "asymmetric", "floor")
