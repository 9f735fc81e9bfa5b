"""Resize (nearest and linear) on NHWC.

TensorFlow's resize kernels know three coordinate maps (legacy ``x * in/out``,
half-pixel centres, aligned corners) and one rounding each. The translator computes the
index map ONNX asks for (static: it depends only on shapes and attributes) and uses
``ResizeNearestNeighbor`` / ``ResizeBilinear`` when one of TensorFlow's variants computes
exactly that map (PyTorch's ``Upsample(scale_factor=2)`` export: asymmetric + floor, and
the usual bilinear modes); otherwise it gathers rows and columns with ``tf.gather`` and
interpolates with TensorFlow arithmetic. ``ResizeBilinear`` always returns float32, so
float64 graphs interpolate with the gather path.

The variants TensorFlow has no kernel for run as separable filter taps
(:mod:`anpred.translate.resize_taps`; ``tf.gather``, a product and a sum per resized
axis): cubic (``tf.image.resize``'s bicubic is Keys' kernel with ``a = -0.5``, ONNX's
default is -0.75; ``ResizeBicubic`` reads its weights from a 1024-entry table, which
deviates from the exact kernel by 8e-4 relative at 5x7 -> 9x11, far beyond float32 noise),
antialias (``tf.image.resize(antialias=True)`` is PIL's filter, which differs from ONNX's
by up to 0.17 on ``test_resize_downsample_sizes_linear_antialias`` of ONNX's backend
tests), ``keep_aspect_ratio_policy``, ``half_pixel_symmetric``, ``axes`` that resize the
batch or channel axis, and ranks other than 4. Linear ``tf_crop_and_resize`` of the
spatial axes is TensorFlow's own ``CropAndResize`` (the mode's namesake: same coordinates,
same ``extrapolation_value``); its other variants run as taps.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from anpred.errors import AnpredError
from anpred.translate.registry import NodeCall
from anpred.translate.resize_taps import (
    axis_taps,
    extrapolation_mask,
    plan,
    split_shape,
    tap_layout,
)
from anpred.translate.tensorflow.layout import (
    TFValue,
    layout_op,
    nhwc_axis,
    spatial_result,
)
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.upsample import as_resize

#: Coordinate transformations the translator implements.
_TRANSFORMS = (
    "asymmetric",
    "align_corners",
    "pytorch_half_pixel",
    "half_pixel",
    "tf_half_pixel_for_nn",
)
#: TensorFlow's nearest/bilinear variants as (align_corners, half_pixel_centers).
_TF_VARIANTS = ((False, False), (False, True), (True, False))


def _unsupported(call: NodeCall, what: str) -> AnpredError:
    return AnpredError(f"tensorflow Resize: {what} is not translated (node {call.name})")


def _geometry(
    call: NodeCall, in_shape: list[int], scales: np.ndarray | None, sizes: np.ndarray | None
) -> tuple[list[int], list[float]]:
    """Output sizes and per-axis scale factors (ONNX order, all four axes)."""
    axes = call.attr("axes")
    axes = list(range(4)) if axes is None else [int(a) % 4 for a in axes]
    out = list(in_shape)
    factors = [1.0] * 4
    if sizes is not None and sizes.size:
        if call.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
            raise _unsupported(call, "keep_aspect_ratio_policy other than stretch")
        for axis, size in zip(axes, sizes.reshape(-1), strict=True):
            out[axis] = int(size)
            factors[axis] = int(size) / in_shape[axis]
    elif scales is not None and scales.size:
        for axis, scale in zip(axes, scales.reshape(-1), strict=True):
            factors[axis] = float(scale)
            out[axis] = int(np.floor(in_shape[axis] * float(scale)))
    else:
        raise _unsupported(call, "a Resize without static scales or sizes")
    if out[:2] != list(in_shape[:2]):
        raise _unsupported(call, "resizing the batch or channel axis")
    return out, factors


def _source_coords(mode: str, size_in: int, size_out: int, factor: float) -> np.ndarray:
    """ONNX's coordinate transformation: output index -> input coordinate (float64)."""
    y = np.arange(size_out, dtype=np.float64)
    if mode == "asymmetric":
        return y / factor
    if mode == "align_corners":
        return np.zeros(size_out) if size_out == 1 else y * (size_in - 1) / (size_out - 1)
    if mode == "pytorch_half_pixel":
        return np.full(size_out, -0.5) if size_out == 1 else (y + 0.5) / factor - 0.5
    if mode == "half_pixel":
        return (y + 0.5) / factor - 0.5
    if mode == "tf_half_pixel_for_nn":
        return (y + 0.5) / factor
    raise ValueError(mode)


def _nearest_indices(x: np.ndarray, rounding: str, size_in: int) -> np.ndarray:
    floor = np.floor(x)
    frac = x - floor
    if rounding == "round_prefer_floor":
        idx = np.where(frac > 0.5, floor + 1, floor)
    elif rounding == "round_prefer_ceil":
        idx = np.where(frac >= 0.5, floor + 1, floor)
    elif rounding == "floor":
        idx = floor
    elif rounding == "ceil":
        idx = np.ceil(x)
    else:
        raise ValueError(rounding)
    return np.clip(idx, 0, size_in - 1).astype(np.int64)


def _tf_coords(size_in: int, size_out: int, align: bool, half: bool) -> np.ndarray:
    """Return the float32 source coordinates TensorFlow's resize kernels compute."""
    if align and size_out > 1:
        scale = np.float32(size_in - 1) / np.float32(size_out - 1)
    else:
        scale = np.float32(size_in) / np.float32(size_out)
    y = np.arange(size_out, dtype=np.float32)
    return (y + np.float32(0.5)) * scale if half else y * scale


def _tf_nearest(size_in: int, size_out: int, align: bool, half: bool) -> np.ndarray:
    coords = _tf_coords(size_in, size_out, align, half)
    idx = np.floor(coords + np.float32(0.5)) if align else np.floor(coords)  # roundf: x >= 0
    return np.clip(idx, 0, size_in - 1).astype(np.int64)


def _nearest(
    call: NodeCall, x: tf.Tensor, in_hw: list[int], out_hw: list[int], factors: list[float]
) -> tf.Tensor:
    mode = call.attr("coordinate_transformation_mode", "half_pixel")
    rounding = call.attr("nearest_mode", "round_prefer_floor")
    wanted = [
        _nearest_indices(_source_coords(mode, i, o, f), rounding, i)
        for i, o, f in zip(in_hw, out_hw, factors, strict=True)
    ]
    for align, half in _TF_VARIANTS:
        if all(
            np.array_equal(w, _tf_nearest(i, o, align, half))
            for w, i, o in zip(wanted, in_hw, out_hw, strict=True)
        ):
            return tf.raw_ops.ResizeNearestNeighbor(
                images=x, size=out_hw, align_corners=align, half_pixel_centers=half
            )
    y = tf.gather(x, tf.constant(wanted[0]), axis=1)
    return tf.gather(y, tf.constant(wanted[1]), axis=2)


def _bilinear_variant(mode: str, out_hw: list[int]) -> tuple[bool, bool] | None:
    if mode == "half_pixel" or (mode == "pytorch_half_pixel" and min(out_hw) > 1):
        return False, True
    if mode == "align_corners":
        return True, False
    if mode == "asymmetric":
        return False, False
    return None


def _linear(
    call: NodeCall, x: tf.Tensor, in_hw: list[int], out_hw: list[int], factors: list[float]
) -> tf.Tensor:
    mode = call.attr("coordinate_transformation_mode", "half_pixel")
    exact = all(o == i * f for i, o, f in zip(in_hw, out_hw, factors, strict=True))
    variant = _bilinear_variant(mode, out_hw)
    if x.dtype == tf.float32 and exact and variant is not None:
        return tf.raw_ops.ResizeBilinear(
            images=x, size=out_hw, align_corners=variant[0], half_pixel_centers=variant[1]
        )
    y = x
    for axis, (i, o, f) in reversed(list(enumerate(zip(in_hw, out_hw, factors, strict=True)))):
        coords = _source_coords(mode, i, o, f)
        lower = np.floor(coords)
        weight = coords - lower
        shape = [1, 1, 1, 1]
        shape[axis + 1] = o
        low = tf.gather(y, np.clip(lower, 0, i - 1).astype(np.int64), axis=axis + 1)
        high = tf.gather(y, np.clip(lower + 1, 0, i - 1).astype(np.int64), axis=axis + 1)
        y = low + (high - low) * tf.constant(weight.reshape(shape), x.dtype)
    return y


def _by_taps(
    call: NodeCall, x: TFValue, scales: np.ndarray | None, sizes: np.ndarray | None
) -> TFValue:
    """Resize as separable filter taps: ``tf.gather``, product and sum per resized axis."""
    if (scales is None or not scales.size) and (sizes is None or not sizes.size):
        raise _unsupported(call, "a Resize without static scales or sizes")
    shape = [int(d) for d in x.onnx_shape()]
    geometry = plan(call, shape, call.const(1), scales, sizes)
    nhwc = x.rank == 4
    t = x.nhwc() if nhwc else x.nchw()
    fill = float(call.attr("extrapolation_value", 0.0))
    for axis in geometry.resized(shape):
        taps = axis_taps(call, geometry, shape, axis)
        local = dataclasses.replace(taps, axis=nhwc_axis(axis) if nhwc else axis)
        index, weight = tap_layout(local, x.rank)
        gathered = tf.reshape(
            tf.gather(t, tf.constant(index), axis=local.axis),
            split_shape(t.shape.as_list(), local),
        )
        t = tf.reduce_sum(gathered * tf.constant(weight, t.dtype), axis=local.axis + 1)
        mask = extrapolation_mask(local, x.rank)
        if mask is not None:
            t = tf.where(tf.constant(mask), tf.constant(fill, t.dtype), t)
        shape[axis] = geometry.out_shape[axis]
    return spatial_result(t) if nhwc else TFValue(t)


def _crop_and_resize(call: NodeCall, x: TFValue, sizes: np.ndarray | None) -> TFValue | None:
    """Linear ``tf_crop_and_resize`` of the spatial axes as ``tf.image.crop_and_resize``."""
    if x.rank != 4 or x.dtype != tf.float32 or call.attr("mode", "nearest") != "linear":
        return None
    if call.attr("antialias", 0) or call.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        return None
    shape = [int(d) for d in x.onnx_shape()]
    geometry = plan(call, shape, call.const(1), call.const(2), sizes)
    roi = geometry.roi or ((0.0, 1.0),) * 4
    if roi[:2] != ((0.0, 1.0),) * 2 or list(geometry.out_shape[:2]) != shape[:2]:
        return None
    (y1, y2), (x1, x2) = roi[2], roi[3]
    y = tf.image.crop_and_resize(
        x.nhwc(),
        tf.constant([[y1, x1, y2, x2]] * shape[0], tf.float32),
        tf.range(shape[0]),
        list(geometry.out_shape[2:]),
        extrapolation_value=float(call.attr("extrapolation_value", 0.0)),
    )
    return spatial_result(y)


def _needs_taps(call: NodeCall, rank: int) -> bool:
    """Whether no TensorFlow kernel (nor the gathers above) computes the node's variant."""
    axes = call.attr("axes")
    return (
        rank != 4
        or call.attr("mode", "nearest") not in ("nearest", "linear")
        or bool(call.attr("antialias", 0))
        or call.attr("keep_aspect_ratio_policy", "stretch") != "stretch"
        or call.attr("coordinate_transformation_mode", "half_pixel") not in _TRANSFORMS
        or (axes is not None and sorted(int(a) % 4 for a in axes) != [2, 3])
    )


@layout_op("Resize", since=11)
def resize(
    call: NodeCall,
    x: TFValue,
    roi: TFValue | None = None,
    scales: TFValue | None = None,
    sizes: TFValue | None = None,
) -> TFValue:
    """ONNX Resize on TensorFlow's resize kernels, gathers, or separable filter taps.

    Nearest and linear of a 4-D tensor's spatial axes run TensorFlow's resize kernels or
    gathers; linear ``tf_crop_and_resize`` runs ``CropAndResize``; every other variant
    runs as separable filter taps.
    """
    if call.attr("coordinate_transformation_mode") == "tf_crop_and_resize":
        native = _crop_and_resize(call, x, None if sizes is None else call.const(3))
        if native is not None:
            return native
    if _needs_taps(call, x.rank):
        return _by_taps(
            call,
            x,
            None if scales is None else call.const(2),
            None if sizes is None else call.const(3),
        )
    in_shape = [int(d) for d in x.onnx_shape()]
    out, factors = _geometry(
        call,
        in_shape,
        None if scales is None else call.const(2),
        None if sizes is None else call.const(3),
    )
    transform = call.attr("coordinate_transformation_mode", "half_pixel")
    if transform not in _TRANSFORMS:
        raise _unsupported(call, f"coordinate_transformation_mode {transform!r}")
    mode = call.attr("mode", "nearest")
    t = x.nhwc()
    if mode == "nearest":
        y = _nearest(call, t, in_shape[2:], out[2:], factors[2:])
    elif mode == "linear":
        y = _linear(call, t, in_shape[2:], out[2:], factors[2:])
    else:
        raise _unsupported(call, f"mode {mode!r}")
    return spatial_result(y)


@layout_op("Upsample", since=7)
def upsample(call: NodeCall, x: TFValue, scales: TFValue | None = None) -> TFValue:
    """ONNX Upsample (opset 7-9): the equivalent asymmetric Resize (nearest floor, linear)."""
    resize_call = as_resize(call)
    marker = TFValue(tf.constant(resize_call.const(2)))
    return resize(resize_call, x, None, marker)
