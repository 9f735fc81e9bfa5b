"""TensorFlow translators, one ONNX node at a time, against the ONNX reference in float64.

Every case builds its one-node graph twice: in float32 for TensorFlow and in float64 for
``onnx.reference.ReferenceEvaluator`` (the float32 inputs widened exactly). A case runs in
three TensorFlow participants: NHWC (the default: layout propagation, ``tf.function``),
NCHW, and float64. The error is ``max|tf - reference| / max|reference|`` after undoing the
reported layout; each op family has a bound set from the errors measured on this machine
(see ``TOLERANCE``).

This file imports one DL library: tensorflow.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import onnx  # noqa: E402
from one_node import (  # noqa: E402
    BRIEF_OPS,
    FLOAT_TYPE,
    Case,
    Static,
    as_double,
    erf,
    f32,
    i64,
    reference,
    run_case,
    softmax_rows,
    static,
    uniform,
)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from anpred.errors import MissingTranslatorError, UsageError  # noqa: E402
from anpred.translate.graph import GraphProgram  # noqa: E402
from anpred.translate.registry import registered_ops  # noqa: E402
from anpred.translate.tensorflow import make_adapter  # noqa: E402

NHWC = make_adapter()
NCHW = make_adapter({"layout": "NCHW"})
FP64 = make_adapter({"dtype": "float64"})

#: Largest error ``max|tf - ref| / max|ref|`` allowed per family, float32. The measured
#: maxima over the cases below (TensorFlow 2.21 CPU, oneDNN on, both layouts) are in the
#: comments; the bounds leave ~5-10x room. fp32's unit roundoff is 2**-24 = 6.0e-8.
TOLERANCE = {
    "exact": 0.0,  # selection/copy ops: the result equals the rounded reference
    "elementwise": 5e-7,  # one or two correctly rounded ops; measured 8.0e-8 (Pow)
    "activation": 2e-6,  # TF's exp/log/tanh/erf/sigmoid kernels; measured 2.5e-7 (Erf)
    "softmax": 1e-6,  # exp, sum, divide; measured 1.3e-7
    "reduce": 2e-6,  # sums of up to 288 terms; measured 2.3e-7 (7.9e-7 under XLA)
    "conv": 1e-6,  # dot products of 4-100 terms (oneDNN); measured 1.7e-7
    "pool": 2e-6,  # window sums then a division; measured 2.3e-7 (GlobalAveragePool)
    "norm": 1e-6,  # moments then rsqrt; measured 1.3e-7
    "matmul": 1e-6,  # dot products of 5-32 terms; measured 1.1e-7
    "resize": 1e-6,  # linear: two products and a sum per axis; measured 1.3e-7
}
#: float64 runs agree with the float64 reference to rounding; measured 4.4e-16.
FP64_TOLERANCE = 1e-13

_RNG = np.random.default_rng(20261130)
_data = uniform(_RNG)


def _grid(*shape: int) -> np.ndarray:
    return _RNG.integers(-2, 3, size=shape).astype(np.float32)


def _scalar(value: float) -> Static:
    return static(value, np.float32)


def _weight(*shape: int) -> Static:
    return Static(_data(*shape, low=-1.0, high=1.0))


def onnx_layout(adapter: Any, value: Any) -> np.ndarray:
    """The value as an array in ONNX's layout (what alignment does with the report)."""
    array = adapter.to_numpy(value)
    if adapter.layout(value) == "NHWC":
        return array.transpose(0, 3, 1, 2)
    return array


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "biu":
        return 0.0 if np.array_equal(got, want) else np.inf
    scale = max(float(np.max(np.abs(want))), 1e-30) if want.size else 1.0
    diff = np.abs(got.astype(np.float64) - want)
    return float(np.max(diff)) / scale if want.size else 0.0


# ----------------------------------------------------------------------------- the cases

X = (2, 4, 6, 6)  # the default 4-D activation


def _elementwise() -> list[Case]:
    x, y = _data(*X), _data(*X)
    positive = _data(*X, low=0.5, high=2.0)
    return [
        Case("elementwise", "Add", [x, y], label="4d"),
        Case("elementwise", "Add", [x, _weight(4, 1, 1)], label="per_channel_const"),
        Case("elementwise", "Add", [x, f32(0.5)], label="scalar"),
        Case("elementwise", "Add", [_data(2, 5, 3), _data(3)], label="3d_row"),
        Case("elementwise", "Sub", [x, _data(1, 4, 1, 1)], label="channel_feed"),
        Case("elementwise", "Sub", [f32(1.0), x], label="scalar_first"),
        Case("elementwise", "Mul", [x, _weight(6)], label="row_const"),
        Case("elementwise", "Mul", [x, _weight(1, 6, 1)], label="column_const"),
        Case("elementwise", "Div", [x, positive], label="4d"),
        Case("elementwise", "Div", [x, _weight(4, 1, 1)], label="per_channel"),
        Case("elementwise", "Pow", [positive, f32(2.0)], label="square"),
        Case("elementwise", "Pow", [positive, _data(*X, low=-1.0, high=1.0)], label="4d"),
        Case("elementwise", "Min", [x, y, _weight(4, 1, 1)], label="3_inputs"),
        Case("elementwise", "Max", [x, y]),
        Case("elementwise", "Mod", [x, f32(0.7)], attrs={"fmod": 1}, label="fmod"),
        Case("exact", "Mod", [i64(-7, 5, 9, -3), i64(3)], label="int"),
        Case("exact", "Equal", [_grid(*X), _grid(4, 1, 1)]),
        Case("exact", "Where", [_data(*X) > 0, x, f32(0.0)], label="scalar_y"),
        Case("exact", "Where", [_data(1, 1, 6, 6) > 0, x, _weight(4, 1, 1)], label="broadcast"),
    ]


def _activation() -> list[Case]:
    x = _data(*X, low=-4.0, high=4.0)
    positive = _data(*X, low=0.1, high=4.0)
    cases = [Case("activation", op, [x]) for op in ("Sigmoid", "Tanh", "Exp")]
    cases += [
        # the reference evaluator computes Erf in float32 (np.vectorize(erf, otypes="f"))
        Case("activation", "Erf", [x], expect=erf),
        Case("activation", "Log", [positive]),
        Case("elementwise", "Sqrt", [positive]),
        Case("exact", "Relu", [x]),
        Case("exact", "Neg", [x]),
        Case("exact", "Abs", [x]),
        Case("elementwise", "LeakyRelu", [x], attrs={"alpha": 0.1}),
        Case("elementwise", "HardSigmoid", [x], label="default"),
        Case("elementwise", "HardSigmoid", [x], attrs={"alpha": 1 / 6, "beta": 0.5}, label="torch"),
        # exactly x * relu6(x + 3) / 6; the reference's function body rounds 1/6 to float32
        Case("elementwise", "HardSwish", [x], expect=lambda x: x * np.clip(x + 3, 0, 6) / 6),
        Case("exact", "Clip", [x, f32(0.0), f32(6.0)], label="relu6"),
        Case("exact", "Clip", [x, f32(-0.5), None], label="min_only"),
        Case("exact", "Clip", [x, f32(-0.3), f32(0.4)], label="both"),
        Case("exact", "Clip", [x], attrs={"min": -1.0, "max": 1.0}, opset=6, label="opset6"),
        Case("exact", "Identity", [x]),
        Case("exact", "Dropout", [x], label="one_output"),
        Case("exact", "Dropout", [x], outputs=2, label="mask"),
        Case("exact", "Cast", [x], attrs={"to": TensorProto.INT64}, label="to_int"),
        Case("exact", "Cast", [i64(1, -2, 3)], attrs={"to": FLOAT_TYPE}, label="to_float"),
        Case("exact", "Cast", [x > 0], attrs={"to": FLOAT_TYPE}, label="bool_to_float"),
    ]
    return cases


def _softmax_reduce() -> list[Case]:
    x = _data(*X)
    return [
        Case("softmax", "Softmax", [x], attrs={"axis": 1}, label="channels"),
        Case("softmax", "Softmax", [x], label="last"),
        Case("softmax", "Softmax", [_data(2, 3, 8)], attrs={"axis": -1}, label="3d"),
        # before opset 13 Softmax flattens to 2-D at axis; the reference ignores that
        Case(
            "softmax",
            "Softmax",
            [x],
            attrs={"axis": 1},
            opset=11,
            label="opset11_coerced",
            expect=lambda x: softmax_rows(x.reshape(len(x), -1)).reshape(x.shape),
        ),
        Case("softmax", "LogSoftmax", [x], attrs={"axis": 1}),
        Case("reduce", "ReduceMean", [x], attrs={"axes": [2, 3]}, label="spatial_keep"),
        Case("reduce", "ReduceMean", [x], attrs={"axes": [1], "keepdims": 0}, label="c_drop"),
        Case("reduce", "ReduceMean", [x, i64(-1)], opset=18, label="opset18_input"),
        Case("reduce", "ReduceSum", [x, i64(1)], attrs={"keepdims": 0}, label="c_drop"),
        Case("reduce", "ReduceSum", [x, i64(2, 3)], attrs={"keepdims": 0}, label="hw_drop"),
        Case("reduce", "ReduceSum", [x], label="all"),
        Case("exact", "ReduceMax", [x], attrs={"axes": [-1], "keepdims": 1}, label="w"),
        Case("exact", "ReduceMax", [x], attrs={"noop_with_empty_axes": 1}, opset=18, label="noop"),
    ]


def _conv() -> list[Case]:
    x = _data(2, 4, 9, 9)
    return [
        Case("conv", "Conv", [x, _weight(6, 4, 3, 3), _weight(6)], {"pads": [1] * 4}, label="3x3"),
        Case("conv", "Conv", [x, _weight(5, 4, 1, 1)], label="1x1_nobias"),
        Case(
            "conv",
            "Conv",
            [x, _weight(6, 4, 3, 3), _weight(6)],
            {"strides": [2, 2], "pads": [0, 0, 1, 1]},
            label="s2_asym",
        ),
        Case(
            "conv",
            "Conv",
            [x, _weight(3, 4, 3, 3)],
            {"dilations": [2, 2], "pads": [2, 2, 2, 2]},
            label="dilated",
        ),
        Case(
            "conv",
            "Conv",
            [x, _weight(4, 1, 3, 3), _weight(4)],
            {"group": 4, "strides": [2, 2], "pads": [1] * 4},
            label="depthwise_s2",
        ),
        Case("conv", "Conv", [x, _weight(8, 1, 3, 3)], {"group": 4}, label="depthwise_mult2"),
        Case(
            "conv",
            "Conv",
            [x, _weight(6, 2, 3, 3), _weight(6)],
            {"group": 2, "pads": [1] * 4},
            label="grouped",
        ),
        Case(
            "conv",
            "Conv",
            [x, _weight(5, 4, 3, 3)],
            {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
            label="same_upper",
        ),
        Case(
            "conv",
            "Conv",
            [x, _weight(5, 4, 4, 4)],
            {"auto_pad": "SAME_LOWER"},
            label="same_lower",
        ),
        Case("conv", "Conv", [x, _weight(5, 4, 3, 3)], {"auto_pad": "VALID"}, label="valid"),
        Case("conv", "Conv", [x, _weight(3, 4, 5, 5)], {"pads": [2] * 4}, label="5x5_same"),
        Case(
            "conv",
            "Conv",
            [_data(2, 3, 11), _weight(4, 3, 3), _weight(4)],
            {"pads": [1, 1], "strides": [2]},
            label="1d",
        ),
    ]


def _pool() -> list[Case]:
    x = _data(2, 3, 8, 8)
    k3 = {"kernel_shape": [3, 3]}
    return [
        Case("exact", "MaxPool", [x], {"kernel_shape": [2, 2], "strides": [2, 2]}, label="2x2"),
        Case("exact", "MaxPool", [x], {**k3, "pads": [1] * 4}, label="3x3_same"),
        Case("exact", "MaxPool", [x], {**k3, "strides": [2, 2], "pads": [1] * 4}, label="s2_pad"),
        Case("exact", "MaxPool", [x], {**k3, "strides": [2, 2], "ceil_mode": 1}, label="ceil"),
        Case("exact", "MaxPool", [x], {"kernel_shape": [5, 5], "pads": [2] * 4}, label="sppf"),
        Case("exact", "MaxPool", [x], {**k3, "dilations": [2, 2]}, label="dilated"),
        Case(
            "exact",
            "MaxPool",
            [_data(2, 3, 9, 9)],
            {**k3, "dilations": [2, 2], "strides": [2, 2], "pads": [1] * 4, "ceil_mode": 1},
            label="dilated_s2_ceil",
        ),
        Case(
            "exact", "MaxPool", [_data(2, 3, 9)], {"kernel_shape": [2], "strides": [2]}, label="1d"
        ),
        Case("pool", "AveragePool", [x], {"kernel_shape": [2, 2], "strides": [2, 2]}, label="2x2"),
        Case("pool", "AveragePool", [x], {**k3, "pads": [1] * 4}, label="same_exclude_pad"),
        Case(
            "pool",
            "AveragePool",
            [x],
            {**k3, "strides": [2, 2], "pads": [1] * 4, "count_include_pad": 1},
            label="include_pad",
        ),
        Case(
            "pool",
            "AveragePool",
            [x],
            {**k3, "strides": [2, 2], "pads": [1] * 4},
            label="exclude_pad_explicit",
        ),
        Case(
            "pool",
            "AveragePool",
            [_data(2, 3, 7, 7)],
            {**k3, "strides": [2, 2], "pads": [1] * 4, "ceil_mode": 1},
            label="ceil_exclude",
        ),
        Case(
            "pool",
            "AveragePool",
            [_data(2, 3, 7, 7)],
            {**k3, "strides": [2, 2], "pads": [1] * 4, "ceil_mode": 1, "count_include_pad": 1},
            label="ceil_include",
        ),
        Case(
            "pool",
            "AveragePool",
            [x],
            {**k3, "strides": [2, 2], "auto_pad": "SAME_UPPER"},
            label="auto_same",
        ),
        Case("pool", "GlobalAveragePool", [x]),
        Case("exact", "GlobalMaxPool", [x]),
    ]


def _norm() -> list[Case]:
    stats = [_weight(4), _weight(4), _weight(4), Static(_data(4, low=0.5, high=2.0))]
    return [
        Case("norm", "BatchNormalization", [_data(*X), *stats], label="4d"),
        Case("norm", "BatchNormalization", [_data(3, 4), *stats], {"epsilon": 1e-3}, label="2d"),
        Case(
            "norm", "LayerNormalization", [_data(2, 5, 16), _weight(16), _weight(16)], label="vit"
        ),
        Case("norm", "LayerNormalization", [_data(*X), _weight(6, 6)], {"axis": 2}, label="axis2"),
    ]


def _matmul() -> list[Case]:
    return [
        Case("matmul", "MatMul", [_data(5, 8), _data(8, 3)], label="2d"),
        Case("matmul", "MatMul", [_data(2, 5, 8), _weight(8, 6)], label="linear"),
        Case("matmul", "MatMul", [_data(2, 3, 5, 8), _data(2, 3, 8, 5)], label="attention"),
        Case("matmul", "MatMul", [_data(2, 1, 4, 5), _data(3, 5, 6)], label="broadcast"),
        Case("matmul", "MatMul", [_data(8), _data(8, 3)], label="vector"),
        Case("matmul", "Gemm", [_data(3, 32), _weight(10, 32), _weight(10)], {"transB": 1}),
        Case(
            "matmul",
            "Gemm",
            [_data(8, 3), _data(8, 4), _weight(3, 4)],
            {"transA": 1, "alpha": 0.5, "beta": 2.0},
            label="transA_alpha_beta",
        ),
        Case("matmul", "Gemm", [_data(3, 8), _data(8, 4)], label="no_c"),
    ]


def _tensor() -> list[Case]:
    x = _data(*X)
    big, small = 2**63 - 1, -(2**63)
    return [
        Case("exact", "Reshape", [x, i64(0, -1, 12)], label="zero_minus_one"),
        Case("exact", "Flatten", [x], label="axis1"),
        Case("exact", "Flatten", [x], {"axis": 2}, label="axis2"),
        Case("exact", "Transpose", [x], {"perm": [0, 2, 3, 1]}, label="to_nhwc"),
        Case("exact", "Transpose", [x], {"perm": [1, 0, 3, 2]}, label="4d"),
        Case("exact", "Transpose", [_data(2, 3, 5)], label="default_perm"),
        Case("exact", "Squeeze", [_data(2, 4, 1, 1), i64(2, 3)], label="axes"),
        Case("exact", "Squeeze", [_data(1, 4, 1, 3)], label="all"),
        Case("exact", "Unsqueeze", [_data(4, 5), i64(0, -1)]),
        Case("exact", "Expand", [_data(4, 1, 1), i64(2, 4, 6, 6)], label="to_4d"),
        Case("exact", "Expand", [_data(3, 1), i64(1, 5)], label="keep_larger"),
        Case("exact", "Tile", [x, i64(1, 2, 1, 3)]),
        Case("exact", "Concat", [x, _data(*X), _weight(2, 2, 6, 6)], {"axis": 1}, label="c"),
        Case("exact", "Concat", [x, _data(2, 4, 3, 6)], {"axis": -2}, label="h"),
        Case("exact", "Concat", [_data(2, 3, 4), _data(2, 3, 2)], {"axis": -1}, label="3d"),
        Case("exact", "Split", [x, i64(1, 3)], {"axis": 1}, outputs=2, label="sizes"),
        Case("exact", "Split", [x], {"axis": -1}, outputs=3, label="equal"),
        Case("exact", "Split", [_data(2, 8)], {"axis": 1, "num_outputs": 3}, 3, 18, "uneven"),
        Case(
            "exact",
            "Slice",
            [x, i64(1, -1), i64(3, small), i64(1, 3), i64(1, -2)],
            label="c_w_negative_step",
        ),
        Case("exact", "Slice", [x, i64(1), i64(big), i64(2), i64(2)], label="h_step2"),
        Case("exact", "Slice", [x, i64(-10, -3), i64(big, -1)], label="default_axes"),
        Case("exact", "Gather", [_data(5, 3, 4), Static(np.asarray(2))], label="scalar"),
        Case("exact", "Gather", [x, i64(0, -1, 2)], {"axis": 1}, label="vector_negative"),
        Case("exact", "Gather", [_data(5, 3), np.asarray([4, 0, -2])], label="dynamic"),
        Case("exact", "Pad", [x, i64(0, 0, 1, 2, 0, 0, 2, 1)], label="spatial"),
        Case("exact", "Pad", [x, i64(0, 1, 0, 0, 0, 0, 0, 1), f32(-3.0)], label="value"),
        # negative pads crop; the reference evaluator rejects them
        Case(
            "exact",
            "Pad",
            [x, i64(0, 0, -1, 1, 0, 0, 2, -2)],
            label="negative",
            expect=lambda x, _: np.pad(x[:, :, 1:, :-2], [(0, 0), (0, 0), (0, 2), (1, 0)]),
        ),
        Case("exact", "Pad", [x, i64(0, 0, 2, 1, 0, 0, 1, 2)], {"mode": "reflect"}, label="refl"),
        Case("exact", "Pad", [x, i64(1, 1), None, i64(-1)], opset=18, label="axes"),
        Case(
            "exact",
            "ConstantOfShape",
            [i64(2, 3)],
            {"value": helper.make_tensor("v", 1, [1], [0.5])},
        ),
        Case(
            "exact",
            "ConstantOfShape",
            [i64(4)],
            {"value": helper.make_tensor("v", TensorProto.INT64, [1], [7])},
            label="int",
        ),
        Case("exact", "Range", [_scalar(0.5), _scalar(4.0), _scalar(0.75)], label="float"),
    ]


def _resize() -> list[Case]:
    x = _data(2, 3, 5, 6)

    def resize(label: str, scales: Any, sizes: Any = None, family: str = "exact", **attrs: Any):
        inputs = [x, None, None if scales is None else f32(*scales)]
        if sizes is not None:
            inputs.append(i64(*sizes))
        return Case(family, "Resize", inputs, attrs, label=label)

    nearest = {"mode": "nearest"}
    floor_asym = {
        **nearest,
        "coordinate_transformation_mode": "asymmetric",
        "nearest_mode": "floor",
    }
    return [
        resize("nearest_torch", (1, 1, 2, 2), **floor_asym),
        resize("nearest_torch_x3", (1, 1, 3, 3), **floor_asym),
        resize("nearest_sizes", None, (2, 3, 10, 12), **floor_asym),
        resize("nearest_half_pixel", (1, 1, 2, 2), **nearest),
        resize("nearest_1.5", (1, 1, 1.5, 1.5), **floor_asym),
        resize("nearest_down", (1, 1, 0.5, 0.5), **nearest),
        resize("nearest_align_ceil", None, (2, 3, 9, 11), **nearest,
               coordinate_transformation_mode="align_corners", nearest_mode="round_prefer_ceil"),
        resize("linear_half_pixel", (1, 1, 2, 2), family="resize", mode="linear"),
        resize("linear_align", None, (2, 3, 9, 11), family="resize", mode="linear",
               coordinate_transformation_mode="align_corners"),
        resize("linear_torch_down", (1, 1, 0.5, 0.5), family="resize", mode="linear",
               coordinate_transformation_mode="pytorch_half_pixel"),
        resize("linear_asym_1.5", (1, 1, 1.5, 1.5), family="resize", mode="linear",
               coordinate_transformation_mode="asymmetric"),
    ]  # fmt: skip


CASES = [
    *_elementwise(),
    *_activation(),
    *_softmax_reduce(),
    *_conv(),
    *_pool(),
    *_norm(),
    *_matmul(),
    *_tensor(),
    *_resize(),
]

#: Every op the brief asks for (docs/helper-brief.md) and the model zoo uses (docs/zoo-ops.md).
REQUIRED_OPS = [*BRIEF_OPS, "Mod"]


def test_every_required_op_has_a_translator_and_a_case():
    assert set(REQUIRED_OPS) <= set(registered_ops("tensorflow"))
    assert set(REQUIRED_OPS) <= {case.op for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_op_matches_float64_reference(case: Case):
    want = reference(case)
    tolerance = TOLERANCE[case.family]
    for adapter in (NHWC, NCHW):
        got = run_case(case, adapter, onnx_layout)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert relative_error(g, w) <= tolerance, adapter.settings()["layout"]
    for g, w in zip(run_case(case, FP64, onnx_layout), want, strict=True):
        assert g.dtype == (np.float64 if w.dtype.kind == "f" else w.dtype)
        assert relative_error(g, w) <= FP64_TOLERANCE


# ------------------------------------------------------------------ layout and settings


def _chain() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Conv -> Relu -> Concat -> MaxPool -> Resize -> Flatten -> Gemm, as in a small CNN."""
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    weights = {
        "w": rng.uniform(-1, 1, (4, 3, 3, 3)),
        "b": rng.uniform(-1, 1, 4),
        "scales": np.asarray([1, 1, 2, 2]),
        "fc": rng.uniform(-1, 1, (5, 8 * 8 * 8)),
        "fc_b": rng.uniform(-1, 1, 5),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("Concat", ["relu", "conv"], ["cat"], axis=1),
        helper.make_node("MaxPool", ["cat"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node(
            "Resize",
            ["pool", "", "scales"],
            ["up"],
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        ),
        helper.make_node("Flatten", ["up"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc", "fc_b"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, {"x": x}


CHAIN_VALUES = ["conv", "relu", "cat", "pool", "up", "flat", "y"]


def _chain_reference() -> dict[str, np.ndarray]:
    model, feeds = _chain()
    model = as_double(model)
    del model.graph.output[:]
    model.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in CHAIN_VALUES)
    values = ReferenceEvaluator(model).run(None, {"x": feeds["x"].astype(np.float64)})
    return dict(zip(CHAIN_VALUES, values, strict=True))


@pytest.fixture(scope="module")
def chain_reference() -> dict[str, np.ndarray]:
    return _chain_reference()


@pytest.mark.parametrize(
    ("settings", "spatial_layout"),
    [
        ({}, "NHWC"),
        ({"layout": "NCHW"}, "NCHW"),
        ({"function": False}, "NHWC"),
        ({"jit_compile": True}, "NHWC"),
        ({"dtype": "float64"}, "NHWC"),
    ],
    ids=["nhwc", "nchw", "eager", "xla", "float64"],
)
def test_chain_matches_reference_in_both_layouts(settings, spatial_layout, chain_reference):
    adapter = make_adapter(settings)
    model, feeds = _chain()
    results = GraphProgram(model, adapter, outputs=CHAIN_VALUES).run(feeds)
    layouts = {name: adapter.layout(value) for name, value in results.items()}
    # conv -> relu -> concat -> maxpool -> resize stay in the spatial layout (no transposes
    # back and forth); Flatten needs ONNX's order, so it and Gemm are NCHW.
    spatial = ["conv", "relu", "cat", "pool", "up"]
    assert layouts == {**dict.fromkeys(spatial, spatial_layout), "flat": "NCHW", "y": "NCHW"}
    for name in spatial:
        array = adapter.to_numpy(results[name])
        n, c, h, w = chain_reference[name].shape
        assert array.shape == ((n, h, w, c) if spatial_layout == "NHWC" else (n, c, h, w))
    # float32: conv (27-term dot products) measured 8.9e-8 in every mode, Gemm (512 terms)
    # 3.0e-7 (1.7e-7 under XLA); float64: measured 9.5e-16
    tolerance = FP64_TOLERANCE if settings.get("dtype") == "float64" else 2e-6
    for name, want in chain_reference.items():
        got = onnx_layout(adapter, results[name])
        assert got.dtype == (np.float64 if settings.get("dtype") == "float64" else np.float32)
        assert relative_error(got, want) <= tolerance, name


def _transposes_in_graph(adapter: Any) -> int:
    """Transpose ops in the traced chain, counted by a hook after the last node."""
    counts = []

    def hook(call: Any, outputs: list[Any]) -> list[Any]:
        if call.op_type == "Gemm":
            ops = outputs[0].tensor.graph.get_operations()
            counts.append(sum(op.type == "Transpose" for op in ops))
        return outputs

    model, feeds = _chain()
    GraphProgram(model, adapter, hook=hook).run(feeds)
    return counts[0]


def test_nhwc_propagates_instead_of_transposing_around_every_op():
    # NHWC: the filter's OIHW -> HWIO and one NHWC -> NCHW before Flatten. NCHW adds the
    # transposes around Conv, MaxPool and Resize (the feed enters NHWC at no op's cost).
    assert _transposes_in_graph(NHWC) == 2
    assert _transposes_in_graph(NCHW) == 7


def test_nhwc_feeds_and_layout_reporting():
    four_d = NHWC.feed(np.zeros((1, 3, 4, 5), np.float32))
    assert NHWC.layout(four_d) == "NHWC" and NHWC.to_numpy(four_d).shape == (1, 4, 5, 3)
    three_d = NHWC.feed(np.zeros((1, 3, 4), np.float32))
    assert NHWC.layout(three_d) == "NCHW" and NHWC.to_numpy(three_d).shape == (1, 3, 4)
    nchw = NCHW.feed(np.zeros((1, 3, 4, 5), np.float32))
    assert NCHW.layout(nchw) == "NCHW" and NCHW.to_numpy(nchw).shape == (1, 3, 4, 5)
    assert NHWC.layout(NHWC.const(np.zeros((1, 3, 4, 5), np.float32))) == "NCHW"
    cast = NHWC.cast(four_d, "float16")
    assert NHWC.layout(cast) == "NHWC" and NHWC.to_numpy(cast).dtype == np.float16
    assert FP64.to_numpy(FP64.feed(np.ones((2, 2), np.float32))).dtype == np.float64


def test_settings_are_recorded_and_checked():
    s = NHWC.settings()
    keys = (
        "layout",
        "function",
        "jit_compile",
        "threads",
        "dtype",
        "mixed_precision",
        "env",
        "bf16_in_effect",
    )
    assert {k: s[k] for k in keys} == {
        "layout": "NHWC",
        "function": True,
        "jit_compile": False,
        "threads": None,
        "dtype": "float32",
        "mixed_precision": None,
        "env": {},
        "bf16_in_effect": False,
    }
    assert s["onednn"] in (True, False, None)  # depends on the CPU
    assert NCHW.settings()["layout"] == "NCHW"
    assert FP64.settings()["dtype"] == "float64"
    with pytest.raises(UsageError, match="unknown tensorflow setting"):
        make_adapter({"layuot": "NHWC"})
    with pytest.raises(UsageError, match="layout"):
        make_adapter({"layout": "CHWN"})
    with pytest.raises(UsageError, match="dtype"):
        make_adapter({"dtype": "float16"})
    with pytest.raises(UsageError, match="jit_compile"):
        make_adapter({"function": False, "jit_compile": True})
    with pytest.raises(UsageError, match="positive integer"):
        make_adapter({"threads": 0})


def test_unknown_op_names_op_opset_node_and_library():
    node = helper.make_node("NoSuchOp", ["x"], ["y"], name="head/custom", domain="com.example")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    with pytest.raises(MissingTranslatorError) as info:
        GraphProgram(model, NHWC)
    assert str(info.value) == (
        "op com.example.NoSuchOp (opset 17, node head/custom) has no tensorflow translator"
    )


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_threads_cannot_change_once_tensorflow_runs():
    NHWC.feed(np.zeros((1, 2), np.float32))  # this process's runtime exists
    with pytest.raises(UsageError, match="before any TensorFlow op runs"):
        make_adapter({"threads": 1})


@pytest.mark.slow  # a fresh interpreter imports TensorFlow: 5-15 s on 2 cores
def test_threads_setting_sizes_the_pools_before_any_op_runs():
    done = _python(
        """
        import numpy as np, tensorflow as tf
        from anpred.errors import UsageError
        from anpred.translate.tensorflow import make_adapter
        adapter = make_adapter({"threads": 2})
        assert adapter.settings()["threads"] == 2
        assert tf.config.threading.get_intra_op_parallelism_threads() == 2
        assert tf.config.threading.get_inter_op_parallelism_threads() == 1
        adapter.feed(np.zeros((1, 2), np.float32))  # TensorFlow's runtime now exists
        make_adapter({"threads": 2})  # the same pools: fine
        try:
            make_adapter({"threads": 1})
        except UsageError as err:
            assert "before any TensorFlow op runs" in str(err)
        else:
            raise AssertionError("changing threads after start-up must fail")
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")


def test_importing_the_package_does_not_import_tensorflow():
    done = _python(
        """
        import sys
        import anpred.translate.tensorflow
        assert "tensorflow" not in sys.modules, "tensorflow imported at package import"
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_tensorflow_is_imported_without_keras_and_jax_which_stay_importable():
    # lean_import: TensorFlow's import would pull in Keras' optimizers and, with JAX
    # installed, JAX (~2 s of a worker's start); neither is used, both stay importable.
    done = _python(
        """
        import importlib.util, sys
        from anpred.translate.tensorflow import make_adapter
        make_adapter()
        print(sorted(m for m in ("keras", "keras.src.optimizers", "jax") if m in sys.modules))
        if importlib.util.find_spec("jax") is not None:
            import jax
            assert callable(jax.jit)
        import tensorflow as tf
        assert tf.keras.__name__.startswith("keras")
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[]", "ok"], done.stdout
