"""Resize (nearest and linear) on NHWC.

TensorFlow's resize kernels know three coordinate maps (legacy ``x * in/out``,
half-pixel centres, aligned corners) and one rounding each. The translator computes the
index map ONNX asks for (static: it depends only on shapes and attributes) and uses
``ResizeNearestNeighbor`` / ``ResizeBilinear`` when one of TensorFlow's variants computes
exactly that map (PyTorch's ``Upsample(scale_factor=2)`` export: asymmetric + floor, and
the usual bilinear modes); otherwise it gathers rows and columns with ``tf.gather`` and
interpolates with TensorFlow arithmetic. ``ResizeBilinear`` always returns float32, so
float64 graphs interpolate with the gather path.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from anpred.errors import AnpredError
from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import TFValue, layout_op, spatial_result
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


@layout_op("Resize", since=11)
def resize(
    call: NodeCall,
    x: TFValue,
    roi: TFValue | None = None,
    scales: TFValue | None = None,
    sizes: TFValue | None = None,
) -> TFValue:
    """ONNX Resize of the spatial axes of a 4-D tensor; modes nearest and linear."""
    if x.rank != 4:
        raise _unsupported(call, f"a {x.rank}-D Resize")
    if call.attr("antialias", 0):
        raise _unsupported(call, "antialias")
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
