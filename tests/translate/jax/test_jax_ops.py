"""jax translators, one ONNX node at a time, against the ONNX reference evaluator in float64.

Every case builds the same one-node graph twice: in float32 for jax and in float64 for
``onnx.reference.ReferenceEvaluator`` (the float32 inputs widened exactly). The error of a
case is ``max|jax - reference| / max|reference|``; each op family has a bound set from the
errors measured on this machine (jax 0.10.2, XLA CPU), see ``TOLERANCE``.

This file imports one DL library: jax.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
pytest.importorskip("jax")

import onnx  # noqa: E402
from one_node import (  # noqa: E402
    BRIEF_OPS,
    Case,
    Static,
    as_double,
    erf,
    f32,
    i64,
    reference,
    run_case,
    softmax_rows,
    uniform,
)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from anpred.errors import MissingTranslatorError, UsageError  # noqa: E402
from anpred.translate.graph import GraphProgram  # noqa: E402
from anpred.translate.jax import make_adapter  # noqa: E402
from anpred.translate.registry import registered_ops  # noqa: E402

JIT = make_adapter()
EAGER = make_adapter({"jit": False})

#: Largest error ``max|jax - ref| / max|ref|`` allowed per family. Measured maxima over the
#: cases below (jax 0.10.2, CPU, float32) are in the comments; bounds leave 2-10x room.
#: fp32 has a unit roundoff of 2**-24 = 6.0e-8.
TOLERANCE = {
    "exact": 0.0,  # selection/copy ops: the float32 result equals the rounded reference
    "rounded": 2e-7,  # one or two correctly rounded fp32 operations; measured 5.0e-8 (Div)
    "transcendental": 2e-6,  # XLA's exp/tanh/erf... and softmax sums; measured 1.8e-7
    "conv": 1e-6,  # dot products of 9-36 terms; measured 1.2e-7
    "pool": 1e-6,  # window sums then a division; measured 1.2e-7 (GlobalAveragePool)
    "norm": 2e-6,  # mean/variance then rsqrt, offset data cancels; measured 3.2e-7
    "matmul": 2e-6,  # dot products of 8-256 terms; measured 5.4e-7 (256 terms)
    "reduce": 1e-6,  # sums of up to 180 terms; measured 1.2e-7
    "resize": 5e-7,  # linear: two products and a sum per axis; measured 9.0e-8
}

#: Largest difference between ``jax.jit`` and op-by-op execution of one node, relative to
#: the result's scale. Single-op translators agree bit for bit; multi-op ones (norms,
#: HardSigmoid, linear Resize, tanh-Gelu, ReduceL2) differ by ~1 ulp because jit fuses
#: them; measured 1.25e-7 (LayerNormalization).
JIT_EAGER_TOLERANCE = 1e-6

_RNG = np.random.default_rng(20261130)
_data = uniform(_RNG)


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """Return ``max|got - want| / max|want|`` (0 for empty tensors)."""
    if want.size == 0:
        return 0.0
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    scale = max(float(np.max(np.abs(want))), np.finfo(np.float64).tiny)
    return float(np.max(diff)) / scale


x4 = _data(2, 3, 5, 6)
pos4 = _data(2, 3, 5, 6, low=0.1, high=3.0)

CASES = [
    # ---- exact: the result is one of the inputs' values ----
    Case("exact", "Relu", [x4]),
    Case("exact", "Neg", [x4]),
    Case("exact", "Abs", [x4]),
    Case("exact", "Identity", [x4]),
    Case("exact", "Floor", [x4]),
    Case("exact", "Ceil", [x4]),
    Case("exact", "Max", [x4, _data(3, 1, 6), _data(6)], label="variadic"),
    Case("exact", "Min", [x4, _data(1, 5, 1)]),
    Case("exact", "Where", [_data(5, 6) > 0, x4, _data(1, 6)]),
    Case("exact", "Equal", [np.round(x4), np.round(_data(6))]),
    Case("exact", "Greater", [x4, _data(6)]),
    Case("exact", "Mod", [x4, _data(6, low=0.5, high=1.5)], {"fmod": 1}, label="fmod"),
    Case(
        "exact",
        "Mod",
        [np.arange(-6, 6, dtype=np.int64), np.asarray([4, -4] * 6, dtype=np.int64)],
        label="int",
    ),
    Case("exact", "Clip", [x4, f32(-0.5), f32(0.7)], opset=13),
    Case("exact", "Clip", [x4, f32(-0.5)], opset=13, label="min-only"),
    Case("exact", "Clip", [x4], {"min": -1.0, "max": 0.25}, opset=6, label="attrs"),
    Case("exact", "Dropout", [x4]),
    Case("exact", "Cast", [x4 * 4], {"to": TensorProto.INT64}, label="float-to-int"),
    Case("exact", "Cast", [np.arange(6, dtype=np.int64)], {"to": TensorProto.FLOAT}),
    Case("exact", "MaxPool", [x4], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1] * 4}),
    Case(
        "exact",
        "MaxPool",
        [x4],
        {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
        label="ceil",
    ),
    Case(
        "exact",
        "MaxPool",
        [x4],
        {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
        label="ceil-k2",
    ),
    Case(
        "exact", "MaxPool", [x4], {"kernel_shape": [2, 3], "pads": [0, 1, 1, 0]}, label="asym-pads"
    ),
    Case("exact", "MaxPool", [x4], {"kernel_shape": [2, 2], "dilations": [2, 2]}, label="dilated"),
    Case(
        "exact",
        "MaxPool",
        [x4],
        {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
        label="same-upper",
    ),
    Case("exact", "MaxPool", [_data(1, 2, 9)], {"kernel_shape": [3], "strides": [2]}, label="1d"),
    Case("exact", "GlobalMaxPool", [x4]),
    Case("exact", "Reshape", [x4, i64(0, -1, 3)]),
    Case("exact", "Transpose", [x4], {"perm": [0, 2, 3, 1]}),
    Case("exact", "Transpose", [x4], label="default-perm"),
    Case("exact", "Flatten", [x4]),
    Case("exact", "Flatten", [x4], {"axis": -1}, label="axis-neg"),
    Case("exact", "Squeeze", [_data(1, 3, 1, 4), i64(0, -2)]),
    Case("exact", "Squeeze", [_data(1, 3, 1, 4)], label="all"),
    Case("exact", "Unsqueeze", [_data(3, 4), i64(0, -1)]),
    Case("exact", "Unsqueeze", [_data(3, 4)], {"axes": [1]}, opset=11, label="attr"),
    Case("exact", "Expand", [_data(3, 1), i64(2, 1, 4)]),
    Case("exact", "Tile", [_data(2, 3), i64(2, 3)]),
    Case("exact", "Concat", [x4, _data(2, 2, 5, 6), _data(2, 1, 5, 6)], {"axis": 1}),
    Case("exact", "Concat", [x4, x4], {"axis": -1}, label="axis-neg"),
    Case("exact", "Split", [_data(2, 10), i64(3, 7)], {"axis": 1}, outputs=2),
    Case("exact", "Split", [_data(6, 4)], outputs=3, opset=13, label="equal"),
    Case(
        "exact",
        "Split",
        [_data(2, 10)],
        {"axis": 1, "num_outputs": 3},
        outputs=3,
        opset=18,
        label="num-outputs",
    ),
    Case(
        "exact",
        "Split",
        [_data(2, 10)],
        {"axis": 1, "split": [4, 6]},
        outputs=2,
        opset=11,
        label="attr",
    ),
    Case("exact", "Slice", [x4, i64(1, -4), i64(3, 2**63 - 1), i64(2, 3)]),
    Case(
        "exact",
        "Slice",
        [x4, i64(-1, 0), i64(-(2**63), 6), i64(-1, 3), i64(-1, 2)],
        label="neg-steps",
    ),
    Case("exact", "Slice", [x4, i64(0), i64(-1)], label="default-axes"),
    Case(
        "exact", "Slice", [x4], {"starts": [1], "ends": [100], "axes": [2]}, opset=9, label="attrs"
    ),
    Case("exact", "Gather", [x4, i64(2, -1, 0)], {"axis": 1}),
    Case(
        "exact", "Gather", [x4, Static(np.asarray(-2, dtype=np.int64))], {"axis": 3}, label="scalar"
    ),
    Case(
        "exact",
        "Gather",
        [x4, np.asarray([[1, 0], [4, 3]], dtype=np.int64)],
        {"axis": 2},
        label="dynamic",
    ),
    Case("exact", "Pad", [x4, i64(0, 1, 2, 0, 0, 0, 1, 3), f32(1.5)]),
    Case("exact", "Pad", [x4, i64(0, 0, 2, 1, 0, 0, 1, 2)], {"mode": "reflect"}, label="reflect"),
    Case("exact", "Pad", [x4, i64(0, 0, 2, 1, 0, 0, 1, 2)], {"mode": "edge"}, label="edge"),
    # The reference evaluator's np.pad rejects negative pads (ONNX: crop).
    Case(
        "exact",
        "Pad",
        [x4, i64(0, 0, -1, 2, 0, 0, 1, -2)],
        label="negative",
        expect=lambda x, _: np.pad(x[:, :, 1:, :-2], ((0, 0), (0, 0), (0, 1), (2, 0))),
    ),
    Case("exact", "Pad", [x4, i64(1, 2, 0, 1), None, i64(2, -1)], opset=18, label="axes"),
    Case(
        "exact",
        "ConstantOfShape",
        [i64(2, 3)],
        {"value": numpy_helper.from_array(np.asarray([2.5], dtype=np.float32))},
    ),
    Case("exact", "ReduceMax", [x4], {"axes": [1, 3], "keepdims": 0}),
    Case("exact", "ReduceMin", [x4, i64(-1)], opset=18),
    Case("exact", "ArgMax", [x4], {"axis": 1}),
    Case(
        "exact",
        "ArgMax",
        [np.round(x4)],
        {"axis": -1, "keepdims": 0, "select_last_index": 1},
        label="last",
    ),
    Case(
        "exact",
        "Resize",
        [x4, None, f32(1, 1, 2, 2)],
        {
            "mode": "nearest",
            "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor",
        },
        label="torch-upsample",
    ),
    Case(
        "exact",
        "Resize",
        [x4, None, None, i64(2, 3, 9, 13)],
        {
            "mode": "nearest",
            "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor",
        },
        label="sizes",
    ),
    Case(
        "exact",
        "Resize",
        [x4, None, f32(1, 1, 0.6, 0.5)],
        {"mode": "nearest"},
        label="down-half-pixel",
    ),
    Case(
        "exact",
        "Resize",
        [x4, None, f32(1, 1, 2, 2.5)],
        {
            "mode": "nearest",
            "coordinate_transformation_mode": "align_corners",
            "nearest_mode": "round_prefer_ceil",
        },
        label="align-corners",
    ),
    # ---- rounded: one or two correctly rounded operations per element ----
    Case("rounded", "Add", [x4, _data(3, 1, 1)]),
    Case("rounded", "Sub", [x4, _data(6)]),
    Case("rounded", "Mul", [x4, Static(_data(5, 6))]),
    Case("rounded", "Div", [x4, _data(6, low=0.5, high=2.0)]),
    Case("rounded", "Sqrt", [pos4]),
    Case("rounded", "Reciprocal", [pos4]),
    Case("rounded", "Pow", [x4, f32(2.0)], label="square"),
    Case("rounded", "Sum", [x4, x4, _data(6)]),
    Case("rounded", "LeakyRelu", [x4], {"alpha": 0.1}),
    Case("rounded", "PRelu", [x4, Static(_data(3, 1, 1))]),
    Case("rounded", "HardSigmoid", [x4 * 3]),
    Case("rounded", "HardSwish", [x4 * 3]),
    Case("rounded", "Cast", [x4], {"to": TensorProto.DOUBLE}, label="to-double"),
    Case("rounded", "Range", [Static(np.asarray(v, dtype=np.float32)) for v in (0.5, 3.2, 0.3)]),
    # ---- transcendental: XLA's elementary-function approximations ----
    Case("transcendental", "Exp", [x4]),
    Case("transcendental", "Log", [pos4]),
    Case("transcendental", "Tanh", [x4]),
    Case("transcendental", "Sigmoid", [x4 * 4]),
    # The reference evaluator rounds Erf (and so Gelu) to float32: np.vectorize(math.erf,
    # otypes="f"). The float64 expectation is written out.
    Case("transcendental", "Erf", [x4], expect=lambda x: erf(x)),
    Case("transcendental", "Sin", [x4]),
    Case("transcendental", "Cos", [x4]),
    Case("transcendental", "Softplus", [x4 * 4]),
    Case("transcendental", "Elu", [x4], {"alpha": 0.5}),
    Case("transcendental", "Pow", [pos4, _data(6)], label="real-exponent"),
    Case("transcendental", "Softmax", [x4 * 4]),
    # The reference evaluator applies opset-13 semantics to Softmax-11 (rows of the 2-D
    # coercion at axis 1 here): the expectation is written out.
    Case(
        "transcendental",
        "Softmax",
        [x4 * 4],
        {"axis": 1},
        opset=11,
        label="coerced-2d",
        expect=lambda x: softmax_rows(x.astype(np.float64).reshape(2, -1)).reshape(x.shape),
    ),
    Case("transcendental", "LogSoftmax", [x4 * 4], {"axis": 2}),
    Case(
        "transcendental",
        "Gelu",
        [x4 * 2],
        opset=20,
        expect=lambda x: 0.5 * x * (1.0 + erf(x / np.sqrt(2.0))),
    ),
    Case("transcendental", "Gelu", [x4 * 2], {"approximate": "tanh"}, opset=20, label="tanh"),
    # ---- convolution ----
    Case(
        "conv",
        "Conv",
        [_data(1, 4, 9, 9), Static(_data(6, 4, 3, 3)), Static(_data(6))],
        {"pads": [1, 1, 1, 1]},
    ),
    Case(
        "conv",
        "Conv",
        [_data(1, 4, 9, 9), Static(_data(6, 4, 3, 3))],
        {"strides": [2, 2], "pads": [0, 1, 2, 1]},
        label="asym-pads-stride",
    ),
    Case(
        "conv",
        "Conv",
        [_data(1, 4, 9, 9), Static(_data(6, 2, 3, 3))],
        {"group": 2, "dilations": [2, 2]},
        label="grouped-dilated",
    ),
    Case(
        "conv",
        "Conv",
        [_data(1, 4, 8, 8), Static(_data(4, 1, 3, 3)), Static(_data(4))],
        {"group": 4, "pads": [1, 1, 1, 1]},
        label="depthwise",
    ),
    Case(
        "conv",
        "Conv",
        [_data(1, 4, 9, 9), Static(_data(6, 4, 3, 3))],
        {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
        label="same-upper",
    ),
    Case(
        "conv",
        "Conv",
        [_data(1, 4, 8, 8), Static(_data(6, 4, 2, 2))],
        {"auto_pad": "SAME_LOWER"},
        label="same-lower",
    ),
    Case(
        "conv",
        "Conv",
        [_data(1, 4, 9, 9), Static(_data(6, 4, 3, 3))],
        {"auto_pad": "VALID", "strides": [1, 2]},
        label="valid",
    ),
    Case(
        "conv",
        "Conv",
        [_data(2, 3, 10), Static(_data(4, 3, 3)), Static(_data(4))],
        {"pads": [1, 2]},
        label="1d",
    ),
    # ---- average pooling ----
    Case(
        "pool",
        "AveragePool",
        [x4],
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
        label="exclude-pad",
    ),
    Case(
        "pool",
        "AveragePool",
        [x4],
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1},
        label="include-pad",
    ),
    Case(
        "pool",
        "AveragePool",
        [x4],
        {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
        label="ceil",
    ),
    Case(
        "pool",
        "AveragePool",
        [x4],
        {
            "kernel_shape": [3, 2],
            "strides": [2, 2],
            "pads": [1, 0, 0, 1],
            "ceil_mode": 1,
            "count_include_pad": 1,
        },
        label="ceil-include-pad",
    ),
    Case("pool", "AveragePool", [x4], {"kernel_shape": [2, 2]}, label="no-pad"),
    Case("pool", "GlobalAveragePool", [x4]),
    # ---- normalization ----
    Case(
        "norm",
        "BatchNormalization",
        [
            x4,
            Static(_data(3)),
            Static(_data(3)),
            Static(_data(3)),
            Static(_data(3, low=0.2, high=2.0)),
        ],
        {"epsilon": 1e-3},
    ),
    Case("norm", "LayerNormalization", [_data(2, 7, 16), Static(_data(16)), Static(_data(16))]),
    Case(
        "norm",
        "LayerNormalization",
        [_data(2, 7, 16) + 3, Static(_data(7, 16))],
        {"axis": -2, "epsilon": 1e-6},
        label="axis-2-offset",
    ),
    Case("norm", "InstanceNormalization", [x4, Static(_data(3)), Static(_data(3))]),
    # ---- matrix products ----
    Case("matmul", "MatMul", [_data(2, 3, 8, 16), _data(16, 5)], label="broadcast"),
    Case("matmul", "MatMul", [_data(4, 1, 6, 8), _data(3, 8, 2)], label="batched"),
    Case("matmul", "MatMul", [_data(64, 256), Static(_data(256, 32))], label="large"),
    Case("matmul", "Gemm", [_data(4, 8), Static(_data(10, 8)), Static(_data(10))], {"transB": 1}),
    Case(
        "matmul",
        "Gemm",
        [_data(8, 4), _data(8, 10), _data(4, 1)],
        {"transA": 1, "alpha": 0.5, "beta": 2.0},
        label="alpha-beta",
    ),
    # ---- reductions ----
    Case("reduce", "ReduceMean", [x4], {"axes": [2, 3]}),
    Case("reduce", "ReduceMean", [x4, i64(1)], {"keepdims": 0}, opset=18, label="axes-input"),
    Case("reduce", "ReduceSum", [x4, i64(-1, 1)], {"keepdims": 0}, opset=13),
    Case("reduce", "ReduceSum", [pos4], label="all-axes"),
    Case("reduce", "ReduceSum", [x4, i64()], {"noop_with_empty_axes": 1}, opset=13, label="noop"),
    Case("reduce", "ReduceProd", [x4 * 0.5 + 1.0], {"axes": [3]}),
    Case("reduce", "ReduceL2", [x4], {"axes": [1]}),
    # ---- linear resize ----
    Case(
        "resize",
        "Resize",
        [x4, None, f32(1, 1, 2, 2)],
        {"mode": "linear"},
        label="linear-half-pixel",
    ),
    Case(
        "resize",
        "Resize",
        [x4, None, None, i64(2, 3, 7, 11)],
        {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
        label="linear-align-corners",
    ),
    Case(
        "resize",
        "Resize",
        [x4, None, f32(1, 1, 0.6, 1.5)],
        {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
        label="linear-pytorch-down",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op_matches_float64_reference_jit_and_eager(case: Case) -> None:
    want = reference(case)
    got = run_case(case, JIT)
    eager = run_case(case, EAGER)
    assert len(got) == len(want) == len(eager)
    for g, w, e in zip(got, want, eager, strict=True):
        assert g.shape == w.shape, f"{case.id}: shape {g.shape} != {w.shape}"
        assert e.dtype == g.dtype and e.shape == g.shape
        if w.dtype == np.bool_ or np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(g, w)
            np.testing.assert_array_equal(e, w)
            continue
        if w.dtype == np.float64:
            assert g.dtype == np.float32, f"{case.id}: computed in {g.dtype}"
        if case.family == "exact":
            np.testing.assert_array_equal(g, w.astype(g.dtype))
        else:
            error = relative_error(g, w)
            assert error <= TOLERANCE[case.family], f"{case.id}: error {error:.3g}"
        assert relative_error(e, g) <= JIT_EAGER_TOLERANCE, f"{case.id}: jit vs eager"


def test_every_brief_op_has_a_translator() -> None:
    missing = sorted(set(BRIEF_OPS) - set(registered_ops("jax")))
    assert not missing
    tested = {case.op for case in CASES}
    assert set(BRIEF_OPS) <= tested


def _chain_model() -> onnx.ModelProto:
    """Conv -> Relu -> MaxPool -> Resize (nearest x2) -> Flatten -> Gemm."""
    inits = [
        numpy_helper.from_array(_data(4, 3, 3, 3), "w"),
        numpy_helper.from_array(_data(4), "b"),
        numpy_helper.from_array(np.asarray([1, 1, 2, 2], dtype=np.float32), "scales"),
        numpy_helper.from_array(_data(5, 4 * 8 * 8) * 0.1, "fc_w"),
        numpy_helper.from_array(_data(5), "fc_b"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node(
            "Resize",
            ["p", "", "scales"],
            ["u"],
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        ),
        helper.make_node("Flatten", ["u"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 3, 8, 8))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2, 5))],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


CHAIN = _chain_model()
CHAIN_X = _data(2, 3, 8, 8)

#: Chain error: conv (27-term dots) and gemm (256-term dots) in fp32; measured 3.2e-7 (jit)
#: and 5.1e-7 (eager).
CHAIN_TOLERANCE = 2e-6


@pytest.mark.parametrize("adapter", [JIT, EAGER], ids=["jit", "eager"])
def test_chain_matches_float64_reference(adapter: Any) -> None:
    (want,) = ReferenceEvaluator(as_double(CHAIN)).run(None, {"x": CHAIN_X.astype(np.float64)})
    program = GraphProgram(CHAIN, adapter)
    assert program.op_types == ["Conv", "Relu", "MaxPool", "Resize", "Flatten", "Gemm"]
    got = adapter.to_numpy(program.run({"x": CHAIN_X})["y"])
    assert got.shape == (2, 5) and got.dtype == np.float32
    assert relative_error(got, want) <= CHAIN_TOLERANCE


def test_int64_outputs_keep_the_onnx_dtype_floats_untouched() -> None:
    nodes = [helper.make_node("ArgMax", ["x"], ["i"], axis=1),
             helper.make_node("Relu", ["x"], ["r"])]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 3))],
        [helper.make_tensor_value_info("i", TensorProto.INT64, (2, 1)),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, (2, 3))],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    program = GraphProgram(model, JIT)
    x = np.array([[0.0, 2.0, 1.0], [3.0, -1.0, 0.5]], dtype=np.float32)
    values = program.run({"x": x})
    raw = JIT.to_numpy(values["i"])
    assert raw.dtype == np.int32  # jax without jax_enable_x64 holds int64 as int32
    restored = JIT.restore_dtype(raw, program.output_dtypes["i"])
    assert restored.dtype == np.int64 and restored.ravel().tolist() == [1, 0]
    relu = JIT.to_numpy(values["r"])
    assert JIT.restore_dtype(relu, program.output_dtypes["r"]) is relu


def test_translated_runs_capture_int64_anchors_as_int64(tmp_path: Any) -> None:
    from anpred.backends.base import ModelJob
    from anpred.backends.translated import TranslatedProgram
    from anpred.interchange.export import AnchoredExport, AnchorOutput

    nodes = [helper.make_node("ArgMax", ["x"], ["i"], axis=1),
             helper.make_node("Relu", ["x"], ["r"])]  # fmt: skip
    outputs = [helper.make_tensor_value_info("i", TensorProto.INT64, (2, 1)),
               helper.make_tensor_value_info("r", TensorProto.FLOAT, (2, 3))]  # fmt: skip
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 3))
    for name, outs in (("anchored", outputs), ("plain", outputs[:1])):
        graph = helper.make_graph(nodes[: len(outs)], "g", [x_info], outs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        onnx.save(model, tmp_path / f"{name}.onnx")
    anchors = (AnchorOutput("relu", "relu", "relu", "body", "r", (2, 3)),
               AnchorOutput("output", "output", "", "head", "i", (2, 1)))  # fmt: skip
    export = AnchoredExport(tmp_path, "x", (2, 3), 17, anchors)
    program = TranslatedProgram("jax", ModelJob(export), {"dtype": "float32"})
    x = np.array([[0.0, 2.0, 1.0], [3.0, -1.0, 0.5]], dtype=np.float32)
    capture = program.infer(x)
    assert capture.arrays["output"].dtype == np.int64  # jax held it as int32
    assert capture.arrays["output"].ravel().tolist() == [1, 0]
    assert capture.arrays["relu"].dtype == np.float32
    assert program.infer_plain(x).dtype == np.int64


def test_unknown_op_names_op_opset_node_and_library() -> None:
    node = helper.make_node("NoSuchOp", ["x"], ["y"], name="mystery")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2,))],
        [helper.make_empty_tensor_value_info("y")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(MissingTranslatorError) as info:
        GraphProgram(model, JIT)
    assert str(info.value) == "op NoSuchOp (opset 17, node mystery) has no jax translator"


def test_settings_record_precision_and_reject_unknown_keys() -> None:
    settings = JIT.settings()
    assert settings["matmul_precision"] == "highest"
    assert settings["jit"] is True and EAGER.settings()["jit"] is False
    assert settings["dtype"] == "float32" and settings["platform"] == "cpu"
    assert settings["layout"] == "NCHW"
    with pytest.raises(UsageError, match="unknown jax setting"):
        make_adapter({"jitt": True})
    with pytest.raises(UsageError, match="float32 or float64"):
        make_adapter({"dtype": "float16"})


def test_default_cpu_matmul_precision_is_full_fp32() -> None:
    # bf16 or TF32 passes would put a 256-term product ~1e-3 away from float64; full fp32
    # stays near 1e-7. "default" (jax's own choice) must equal "highest" on CPU.
    case = Case("matmul", "MatMul", [_data(64, 256), _data(256, 32)])
    want = reference(case)[0]
    highest = run_case(case, JIT)[0]
    default = run_case(case, make_adapter({"matmul_precision": "default"}))[0]
    assert relative_error(highest, want) < 2e-6
    np.testing.assert_array_equal(default, highest)


def _run_python(code: str) -> str:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_importing_the_package_does_not_import_jax() -> None:
    out = _run_python(
        """
        import sys
        import anpred.translate.jax
        print("jax" in sys.modules)
        """
    )
    assert out.strip() == "False"


def _float_makers_model() -> onnx.ModelProto:
    """Ops that make floats of their own: Cast to FLOAT, ConstantOfShape, Range."""
    inits = [numpy_helper.from_array(np.asarray([2, 3], dtype=np.int64), "shape")] + [
        numpy_helper.from_array(np.asarray(v, dtype=np.float32), name)
        for v, name in ((0.5, "start"), (3.2, "limit"), (0.3, "delta"))
    ]
    nodes = [
        helper.make_node("Cast", ["x"], ["cast"], to=TensorProto.FLOAT),
        helper.make_node(
            "ConstantOfShape",
            ["shape"],
            ["filled"],
            value=numpy_helper.from_array(np.asarray([0.1], dtype=np.float32)),
        ),
        helper.make_node("Range", ["start", "limit", "delta"], ["range"]),
    ]
    graph = helper.make_graph(
        nodes,
        "makers",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (4,))],
        [helper.make_empty_tensor_value_info(n) for n in ("cast", "filled", "range")],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_float64_setting_runs_the_whole_graph_in_float64(tmp_path: Any) -> None:
    # x64 is process-wide, so the float64 adapter runs in its own process.
    onnx.save(CHAIN, tmp_path / "chain.onnx")
    onnx.save(_float_makers_model(), tmp_path / "makers.onnx")
    np.save(tmp_path / "x.npy", CHAIN_X)
    out = _run_python(
        f"""
        import numpy as np, onnx
        from anpred.translate.graph import GraphProgram
        from anpred.translate.jax import make_adapter
        adapter = make_adapter({{"dtype": "float64"}})
        folder = {str(tmp_path)!r}
        program = GraphProgram(onnx.load(folder + "/chain.onnx"), adapter)
        y = adapter.to_numpy(program.run({{"x": np.load(folder + "/x.npy")}})["y"])
        np.save(folder + "/y.npy", y)
        makers = GraphProgram(onnx.load(folder + "/makers.onnx"), adapter)
        made = makers.run({{"x": np.asarray([0.1, 0.2, 0.3, 0.4], dtype=np.float32)}})
        print(adapter.settings()["dtype"], adapter.settings()["jax_enable_x64"])
        print(*[adapter.to_numpy(v).dtype for v in made.values()])
        """
    )
    assert out.split() == ["float64", "True"] + ["float64"] * 3
    got = np.load(tmp_path / "y.npy")
    (want,) = ReferenceEvaluator(as_double(CHAIN)).run(None, {"x": CHAIN_X.astype(np.float64)})
    assert got.dtype == np.float64
    # float64 dot products of <= 256 terms: measured 5.1e-16 (double unit roundoff 1.1e-16).
    assert relative_error(got, want) <= 1e-14
