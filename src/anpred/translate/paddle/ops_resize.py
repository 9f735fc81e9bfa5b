"""Resize / Upsample of the spatial axes (NCHW), with ``paddle.nn.functional.interpolate``.

Supported variants (the others raise :class:`~anpred.errors.UsageError`):

* ``nearest`` with ``asymmetric`` coordinates and ``floor`` rounding (what torch's
  ``Upsample(mode="nearest")`` exports): paddle's nearest kernel with
  ``align_corners=False`` maps output index ``i`` to ``floor(i / scale)``.
* ``linear`` with ``half_pixel`` / ``pytorch_half_pixel`` (paddle ``align_mode=0``),
  ``asymmetric`` (``align_mode=1``) or ``align_corners``.
* ``cubic`` (2-D, ``cubic_coeff_a=-0.75``, no ``exclude_outside``) with the same
  coordinate modes as linear.

Scales are handed to paddle as ``scale_factor`` (paddle then maps coordinates with
``1 / scale``, as ONNX does) and sizes as ``size`` (ratio ``in / out``, as ONNX does).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle.nn.functional as F

from anpred.errors import UsageError
from anpred.translate.registry import NodeCall, register

Tensor = Any

_LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}
_LAYOUT = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def _resize(
    call: NodeCall,
    x: Tensor,
    scales: np.ndarray | None,
    sizes: np.ndarray | None,
    mode: str,
    coordinates: str,
    nearest_mode: str,
) -> Tensor:
    rank = len(x.shape) - 2
    if rank not in _LINEAR:
        raise UsageError(f"node {call.name}: Resize of a {rank + 2}-D tensor is not translated")
    if call.attr("antialias", 0) or call.attr("axes") is not None:
        raise UsageError(f"node {call.name}: Resize antialias / axes are not translated")
    kwargs: dict[str, Any] = {"data_format": _LAYOUT[rank]}
    if sizes is not None and sizes.size:
        sizes = [int(s) for s in sizes.reshape(-1)]
        if sizes[:2] != list(x.shape[:2]):
            raise UsageError(f"node {call.name}: Resize of batch or channel axes")
        kwargs["size"] = sizes[2:]
    elif scales is not None and scales.size:
        scales = [float(s) for s in scales.reshape(-1)]
        if scales[:2] != [1.0, 1.0]:
            raise UsageError(f"node {call.name}: Resize of batch or channel axes")
        kwargs["scale_factor"] = scales[2:]
    else:
        raise UsageError(f"node {call.name}: Resize needs static scales or sizes")

    if mode == "nearest":
        if coordinates != "asymmetric" or nearest_mode != "floor":
            raise UsageError(
                f"node {call.name}: nearest Resize with {coordinates}/{nearest_mode} "
                "is not translated (only asymmetric/floor)"
            )
        return F.interpolate(x, mode="nearest", align_corners=False, **kwargs)
    if mode == "linear":
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
        call, x, call.const(1), None, call.attr("mode", "nearest"), "asymmetric", "floor"
    )


@register("paddle", "Resize", since=11)
def resize(
    call: NodeCall, x: Tensor, roi: Tensor = None, scales: Tensor = None, sizes: Tensor = None
) -> Tensor:
    """ONNX Resize opset 11+ (static scales or sizes input; roi unused by these modes)."""
    return _resize(
        call,
        x,
        call.const(2),
        call.const(3),
        call.attr("mode", "nearest"),
        call.attr("coordinate_transformation_mode", "half_pixel"),
        call.attr("nearest_mode", "round_prefer_floor"),
    )


@register("paddle", "Upsample", since=7)
def upsample(call: NodeCall, x: Tensor, scales: Tensor = None) -> Tensor:
    """ONNX Upsample (deprecated; scales attribute in opset 7, input from opset 9)."""
    static = call.const(1) if scales is not None else np.asarray(call.attr("scales"))
    mode = call.attr("mode", "nearest")
    return _resize(call, x, static, None, mode, "asymmetric", "floor")
