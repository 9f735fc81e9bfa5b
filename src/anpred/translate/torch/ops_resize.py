"""ONNX Resize on torch: ``F.interpolate`` where it matches, else gathers along each axis.

``F.interpolate`` is used for the variants it implements exactly: nearest with
``asymmetric`` coordinates and ``floor`` rounding (what ``nn.Upsample`` exports) at integer
scales, and linear with ``half_pixel`` / ``pytorch_half_pixel`` / ``align_corners``
coordinates on the spatial axes, and cubic where it is torch's ``bicubic`` (4-D,
``cubic_coeff_a`` -0.75, no ``exclude_outside``, the same coordinates). Any other nearest
or linear variant gathers along each resized axis with source indices (and, for linear,
weights) computed from the static shapes; the interpolation itself runs in torch
(``index_select``, ``lerp``).

The variants ``F.interpolate`` does not implement run as separable filter taps
(:mod:`anpred.translate.resize_taps`; ``index_select``, a product and a sum per axis):
cubic other than torch's bicubic, ``keep_aspect_ratio_policy``, ``tf_crop_and_resize``
and antialias. ``F.interpolate(antialias=True)`` is not used: its filter is PIL's, which
differs from ONNX's (up to 0.17 on ``test_resize_downsample_sizes_linear_antialias`` of
ONNX's backend tests), and its bicubic antialias uses ``a = -0.5``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name

from anpred.translate.registry import NodeCall, register
from anpred.translate.resize_taps import (
    axis_taps,
    extrapolation_mask,
    plan,
    split_shape,
    tap_layout,
)
from anpred.translate.upsample import as_resize

_LIB = "torch"

Tensor = torch.Tensor

_LINEAR_MODES = {1: "linear", 2: "bilinear", 3: "trilinear"}


def _present(value: np.ndarray | None) -> np.ndarray | None:
    return value if value is not None and np.asarray(value).size else None


def _plan(call: NodeCall, shape: tuple[int, ...]) -> tuple[list[int], list[float], bool]:
    """Output sizes, per-axis scales and whether the scales were given (not derived)."""
    if call.opset < 11:
        scales_in, sizes_in = _present(call.const(1)), None
    else:
        scales_in, sizes_in = _present(call.const(2)), _present(call.const(3))
    if scales_in is None and sizes_in is None:
        raise NotImplementedError("Resize needs static scales or sizes")
    axes = [int(a) % len(shape) for a in call.attr("axes", range(len(shape)))]
    sizes, scales = list(shape), [1.0] * len(shape)
    for i, axis in enumerate(axes):
        if sizes_in is not None:
            sizes[axis] = int(sizes_in[i])
            scales[axis] = sizes[axis] / shape[axis]
        else:
            scales[axis] = float(scales_in[i])
            sizes[axis] = math.floor(shape[axis] * scales[axis])
    return sizes, scales, sizes_in is None


def _source_coords(call: NodeCall, n_in: int, n_out: int, scale: float) -> np.ndarray:
    """Source coordinate of every output index along one axis (ONNX transformation modes)."""
    x = np.arange(n_out, dtype=np.float64)
    mode = call.attr("coordinate_transformation_mode", "half_pixel")
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":  # centred: shifted by the rounding of n_in * scale
        return n_in / 2 * (1 - n_out / (n_in * scale)) + (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if n_out > 1 else np.zeros_like(x)
    if mode == "align_corners":
        return x * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros_like(x)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_half_pixel_for_nn":
        return (x + 0.5) / scale
    raise NotImplementedError(f"Resize coordinate_transformation_mode {mode!r}")


_ROUNDING = {
    "round_prefer_floor": lambda c: np.ceil(c - 0.5),
    "round_prefer_ceil": lambda c: np.floor(c + 0.5),
    "floor": np.floor,
    "ceil": np.ceil,
}


def _gather_axis(call: NodeCall, x: Tensor, axis: int, n_out: int, scale: float) -> Tensor:
    n_in = x.shape[axis]
    coords = _source_coords(call, n_in, n_out, scale)
    if call.attr("mode", "nearest") == "nearest":
        rounded = _ROUNDING[call.attr("nearest_mode", "round_prefer_floor")](coords)
        index = torch.from_numpy(np.clip(rounded, 0, n_in - 1).astype(np.int64))
        return torch.index_select(x, axis, index)
    coords = np.clip(coords, 0, n_in - 1)
    low = np.floor(coords).astype(np.int64)
    high = np.minimum(low + 1, n_in - 1)
    shape = [1] * x.ndim
    shape[axis] = n_out
    weight = torch.from_numpy(coords - low).to(x.dtype).reshape(shape)
    a = torch.index_select(x, axis, torch.from_numpy(low))
    b = torch.index_select(x, axis, torch.from_numpy(high))
    return torch.lerp(a, b, weight)


def _interpolate(
    call: NodeCall, x: Tensor, sizes: list[int], scales: list[float], given: bool
) -> Tensor | None:
    """``F.interpolate`` when it computes exactly the ONNX variant, else ``None``."""
    mode = call.attr("mode", "nearest")
    coords = call.attr("coordinate_transformation_mode", "half_pixel")
    if x.ndim < 3 or x.ndim > 5 or scales[:2] != [1.0, 1.0] or call.attr("antialias", 0):
        return None
    spatial_scales, spatial_sizes = scales[2:], sizes[2:]
    by_scale = {"scale_factor": spatial_scales} if given else {"size": spatial_sizes}
    if mode == "nearest":
        integer = all(s == int(s) and s >= 1 for s in spatial_scales)
        if coords == "asymmetric" and call.attr("nearest_mode") == "floor" and integer:
            return F.interpolate(x, mode="nearest", **by_scale)
        return None
    if mode == "linear":
        torch_mode = _LINEAR_MODES[x.ndim - 2]
    elif mode == "cubic" and x.ndim == 4 and _torch_cubic(call):
        torch_mode = "bicubic"
    else:
        return None
    if coords == "align_corners":
        return F.interpolate(x, size=spatial_sizes, mode=torch_mode, align_corners=True)
    if coords == "half_pixel" or (coords == "pytorch_half_pixel" and min(spatial_sizes) > 1):
        return F.interpolate(x, mode=torch_mode, align_corners=False, **by_scale)
    return None


def _torch_cubic(call: NodeCall) -> bool:
    """Whether ONNX's cubic variant is torch's bicubic kernel (a = -0.75, edge-clamped taps)."""
    return call.attr("cubic_coeff_a", -0.75) == -0.75 and not call.attr("exclude_outside", 0)


def _by_taps(call: NodeCall, x: Tensor) -> Tensor:
    """Resize as separable filter taps: ``index_select``, product and sum per resized axis."""
    if call.opset < 11 or (_present(call.const(2)) is None and _present(call.const(3)) is None):
        raise NotImplementedError("Resize needs static scales or sizes")
    shape = tuple(x.shape)
    geometry = plan(call, shape, call.const(1), call.const(2), call.const(3))
    fill = float(call.attr("extrapolation_value", 0.0))
    for axis in geometry.resized(shape):
        taps = axis_taps(call, geometry, tuple(x.shape), axis)
        index, weight = tap_layout(taps, x.ndim)
        gathered = torch.index_select(x, axis, torch.from_numpy(index))
        gathered = gathered.reshape(split_shape(tuple(x.shape), taps))
        x = torch.sum(gathered * torch.from_numpy(weight).to(x.dtype), dim=axis + 1)
        mask = extrapolation_mask(taps, x.ndim)
        if mask is not None:
            x = torch.where(torch.from_numpy(mask), torch.tensor(fill, dtype=x.dtype), x)
    return x


@register(_LIB, "Resize")
def resize(call: NodeCall, x: Tensor, *rest: Tensor | None) -> Tensor:
    """ONNX Resize from static scales or sizes, every mode and coordinate transformation.

    Cubic runs ``F.interpolate`` on 4-D inputs where it is torch's bicubic kernel
    (``half_pixel`` / ``align_corners`` coordinates, ``cubic_coeff_a`` -0.75, no
    ``exclude_outside``), separable taps otherwise.
    """
    mode = call.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise NotImplementedError(f"Resize mode {mode!r}")
    if (
        call.attr("antialias", 0)
        or call.attr("keep_aspect_ratio_policy", "stretch") != "stretch"
        or call.attr("coordinate_transformation_mode") == "tf_crop_and_resize"
    ):
        return _by_taps(call, x)
    sizes, scales, given = _plan(call, tuple(x.shape))
    native = _interpolate(call, x, sizes, scales, given)
    if native is not None:
        return native
    if mode == "cubic":
        return _by_taps(call, x)
    for axis, (n_out, scale) in enumerate(zip(sizes, scales, strict=True)):
        if n_out != x.shape[axis] or scale != 1.0:
            x = _gather_axis(call, x, axis, n_out, scale)
    return x


@register(_LIB, "Upsample", since=7)
def upsample(call: NodeCall, x: Tensor, scales: Tensor | None = None) -> Tensor:
    """ONNX Upsample (opset 7-9): the equivalent asymmetric Resize (nearest floor, linear)."""
    return resize(as_resize(call), x)
