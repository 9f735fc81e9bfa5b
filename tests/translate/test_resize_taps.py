"""Resize as separable filter taps (DL-free): NumPy applies the taps, ONNX's evaluator judges."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from anpred.translate.registry import NodeCall
from anpred.translate.resize_taps import (
    axis_taps,
    extrapolation_mask,
    plan,
    split_shape,
    tap_layout,
)

X = np.random.default_rng(18).standard_normal((1, 2, 6, 7))
ROI = np.array([0, 0, -0.2, 0.3, 1, 1, 1.1, 0.8], np.float32)

#: (attributes, roi, scales, sizes): the variants no library resize kernel computes as ONNX
#: defines them, and two the kernels do (the taps must agree with them too).
VARIANTS: dict[str, tuple[dict[str, Any], Any, Any, Any]] = {
    "cubic_a_n0p5_exclude": ({"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1},
                             None, [1, 1, 1.5, 0.7], None),
    "cubic_antialias": ({"mode": "cubic", "antialias": 1}, None, None, [1, 2, 4, 3]),
    "linear_antialias": ({"mode": "linear", "antialias": 1}, None, [1, 1, 0.6, 0.45], None),
    "not_larger": ({"mode": "nearest", "keep_aspect_ratio_policy": "not_larger",
                    "axes": [2, 3]}, None, None, [9, 9]),
    "not_smaller": ({"mode": "linear", "keep_aspect_ratio_policy": "not_smaller",
                     "axes": [3, 2]}, None, None, [4, 4]),
    "tf_crop": ({"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
                 "extrapolation_value": 3.0}, ROI, None, [1, 2, 5, 4]),
    "half_pixel_symmetric": ({"mode": "linear",
                              "coordinate_transformation_mode": "half_pixel_symmetric"},
                             None, [1, 1, 1.7, 0.7], None),
    "nearest_ceil": ({"mode": "nearest", "nearest_mode": "ceil",
                      "coordinate_transformation_mode": "asymmetric"}, None, [1, 1, 2, 1.5], None),
    "cubic_align_corners": ({"mode": "cubic", "coordinate_transformation_mode": "align_corners"},
                            None, None, [1, 2, 9, 5]),
}  # fmt: skip


def _reference(attrs: dict[str, Any], roi: Any, scales: Any, sizes: Any) -> np.ndarray:
    names = ["x", "roi" if roi is not None else "", "scales" if scales is not None else "",
             "sizes" if sizes is not None else ""]  # fmt: skip
    node = helper.make_node("Resize", [n for n in names], ["y"], **attrs)
    inits = []
    if roi is not None:
        inits.append(helper.make_tensor("roi", TensorProto.FLOAT, [len(roi)], roi))
    if scales is not None:
        inits.append(helper.make_tensor("scales", TensorProto.FLOAT, [len(scales)], scales))
    if sizes is not None:
        inits.append(helper.make_tensor("sizes", TensorProto.INT64, [len(sizes)], sizes))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, X.shape)],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    return ReferenceEvaluator(model).run(None, {"x": X})[0]


def _by_taps(attrs: dict[str, Any], roi: Any, scales: Any, sizes: Any) -> np.ndarray:
    call = NodeCall("Resize", "r", attrs, 19)
    as_array = [  # as the initializers hold them: float32 roi and scales, int64 sizes
        None if v is None else np.asarray(v, dtype)
        for v, dtype in zip((roi, scales, sizes), (np.float32, np.float32, np.int64), strict=True)
    ]
    geometry = plan(call, X.shape, *as_array)
    x = X
    for axis in geometry.resized(X.shape):
        taps = axis_taps(call, geometry, x.shape, axis)
        index, weight = tap_layout(taps, x.ndim)
        x = (np.take(x, index, axis=axis).reshape(split_shape(x.shape, taps)) * weight).sum(
            axis=axis + 1
        )
        mask = extrapolation_mask(taps, x.ndim)
        if mask is not None:
            x = np.where(mask, attrs["extrapolation_value"], x)
    return x


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_taps_reproduce_the_onnx_reference(variant: str) -> None:
    want = _reference(*VARIANTS[variant])
    got = _by_taps(*VARIANTS[variant])
    assert got.shape == want.shape
    # The evaluator rounds some of its arithmetic to float32 (its cubic_coeff_a attribute and
    # the roi are float32 scalars, so the cubic weights and tf_crop_and_resize coordinates
    # are float32): measured differences up to 1.3e-6 on values of order 1, where any
    # semantic error (a tap, a coordinate, a weight) moves outputs by 1e-2 or more.
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


def test_plan_keeps_the_aspect_ratio_and_maps_axes() -> None:
    call = NodeCall("Resize", "r", {"axes": [3, 2], "keep_aspect_ratio_policy": "not_larger"}, 18)
    geometry = plan(call, (1, 2, 6, 7), None, None, np.array([9, 9]))
    assert geometry.out_shape == (1, 2, 8, 9)  # scale min(9/7, 9/6) = 9/7: 6 * 9/7 = 7.7 -> 8
    assert geometry.scales[2] == geometry.scales[3] == pytest.approx(9 / 7)
    assert geometry.resized((1, 2, 6, 7)) == [3, 2]


def test_extrapolated_positions_are_flagged() -> None:
    attrs, roi, scales, sizes = VARIANTS["tf_crop"]
    call = NodeCall("Resize", "r", attrs, 19)
    geometry = plan(call, X.shape, roi, scales, np.asarray(sizes))
    taps = axis_taps(call, geometry, X.shape, 2)
    assert taps.extrapolated is not None and taps.extrapolated[0]  # roi starts at -0.2
    assert axis_taps(call, geometry, X.shape, 3).extrapolated is None  # 0.3 .. 0.8 inside
