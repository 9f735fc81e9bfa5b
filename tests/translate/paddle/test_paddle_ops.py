"""Paddle translators against the ONNX reference evaluator run in float64.

Every case is a one-node ONNX graph. Float inputs are drawn in float32; the reference runs
a float64 copy of the same graph on the same (float32-representable) values, so the error
measured is the one paddle's float32 kernels add. The float32 graph also runs with
``settings={"dtype": "float64"}``, which must reproduce the reference to float64 accuracy.
Error metric: :func:`rel_error` (max abs error over the data's magnitude; element-wise
relative error is meaningless near zeros).

This file imports paddle and never tensorflow (the two segfault in one process).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from one_node import (
    BRIEF_OPS,
    FLOAT_TYPE,
    Static,
    build,
    erf,
    reference,
    run_case,
    softmax_rows,
    uniform,
)
from one_node import Case as OneNodeCase
from one_node import static as st
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

pytest.importorskip("paddle")

from anpred.errors import MissingTranslatorError, UsageError  # noqa: E402
from anpred.translate.graph import GraphProgram  # noqa: E402
from anpred.translate.paddle import make_adapter  # noqa: E402
from anpred.translate.registry import registered_ops  # noqa: E402

#: Largest error (see :func:`rel_error`) of a float32 paddle case against the float64
#: reference. Measured worst over the cases below with 8 random seeds (paddlepaddle 3.3.1,
#: CPU): 3.3e-7 (Conv), 2.5e-7 (ReduceSum), 5.8e-7 / 9.0e-7 for linear / cubic Resize with
#: non-dyadic ratios, 1.1e-7 for the element-wise families; float32 epsilon is 1.2e-7.
FP32_RTOL = 2e-6
#: Same for the float64 run (``settings={"dtype": "float64"}``): measured worst 3.0e-16;
#: 1e-12 still fails on any float32 step inside the graph (~1e-7).
FP64_RTOL = 1e-12
#: paddle's interpolate kernels compute source coordinates in float32 even for float64
#: data: linear / cubic Resize with ratios that are not dyadic fractions (align_corners
#: 4/7, sizes 7/11) are 4.4e-7 away from an exact float64 evaluation (measured worst 5.8e-7
#: over 8 seeds); dyadic ratios (scale 2) are exact.
FP64_RESIZE_RTOL = 2e-6

#: Ops the brief requires (docs/helper-brief.md); docs/zoo-ops.md adds the zoo's ops.
REQUIRED_OPS = BRIEF_OPS


@dataclass
class Case(OneNodeCase):
    """A one-node case (:class:`one_node.Case`) with a float64 tolerance of its own."""

    #: float64 tolerance where paddle's own float64 kernel is not float64-exact
    fp64_rtol: float = 0.0


_rng = np.random.default_rng(20261130)
rand = uniform(_rng, low=-1.0, high=1.0)


# fmt: off
def _cases() -> list[Case]:
    x4 = rand(2, 3, 5, 6)
    pos = rand(2, 3, 5, 6, low=0.1, high=3.0)
    cases = [
        Case("elementwise", "Add", [x4, rand(3, 1, 6)]),
        Case("elementwise", "Sub", [x4, st(rand(6), np.float32)]),
        Case("elementwise", "Mul", [x4, rand(1, 3, 1, 1)]),
        Case("elementwise", "Div", [x4, rand(2, 3, 5, 6, low=0.5, high=2.0)]),
        Case("elementwise", "Div", [np.array([-7, 7, 5, -6]), st([2, -2, 3, 3])],
             label="int_trunc"),
        Case("elementwise", "Pow", [pos, st(2.0, np.float32)], label="square"),
        Case("elementwise", "Pow", [pos, rand(5, 6)], label="tensor"),
        Case("elementwise", "Mod", [np.arange(-7, 8, dtype=np.int64), st([3, -4] * 7 + [5])],
             label="int"),
        Case("elementwise", "Mod", [x4 * 5, rand(6, low=0.5, high=2.0)], {"fmod": 1},
             label="fmod"),
        Case("elementwise", "Min", [x4, rand(6), rand(3, 1, 1)]),
        Case("elementwise", "Max", [x4, rand(6)]),
        Case("elementwise", "Where", [rand(5, 6) > 0, x4, rand(6)]),
        Case("elementwise", "Equal", [np.round(x4 * 2), np.round(rand(6) * 2)]),
        Case("elementwise", "Cast", [x4], {"to": TensorProto.INT64}, label="to_int"),
        Case("elementwise", "Cast", [np.arange(6, dtype=np.int64)], {"to": FLOAT_TYPE}),
        Case("elementwise", "Identity", [x4]),
        Case("elementwise", "Dropout", [x4]),
        Case("elementwise", "Dropout", [x4], outputs=2, label="mask"),
    ]
    for op in ("Exp", "Neg", "Abs", "Floor", "Reciprocal"):
        cases.append(Case("elementwise", op, [x4 * 3 if op != "Reciprocal" else pos]))
    # the reference evaluator computes Erf in float32 (np.vectorize(math.erf, otypes="f"))
    cases.append(Case("elementwise", "Erf", [x4 * 3], expect=erf))
    cases += [Case("elementwise", "Sqrt", [pos]), Case("elementwise", "Log", [pos])]
    for op in ("Relu", "Sigmoid", "Tanh", "Elu"):
        cases.append(Case("activation", op, [x4 * 4]))
    cases += [
        Case("activation", "LeakyRelu", [x4], {"alpha": 0.1}),
        Case("activation", "HardSigmoid", [x4 * 4], {"alpha": 1 / 6, "beta": 0.5}),
        Case("activation", "HardSigmoid", [x4 * 4], label="defaults"),
        Case("activation", "Clip", [x4, st(0.0, np.float32), st(0.5, np.float32)]),
        Case("activation", "Clip", [x4, None, st(0.2, np.float32)], label="max_only"),
        Case("activation", "Clip", [x4, rand(), rand() + 1.0], label="dynamic"),
        Case("activation", "Softmax", [x4 * 5], {"axis": 1}),
        Case("activation", "Softmax", [x4 * 5], label="last"),
        # the reference evaluator applies opset-13 semantics to every Softmax version
        Case("activation", "Softmax", [x4 * 5], {"axis": 1}, opset=11, label="opset11_2d",
             expect=lambda x: softmax_rows(x.reshape(2, -1)).reshape(x.shape)),
        # the reference expands HardSwish into HardSigmoid with alpha=1/6 as a float32
        # attribute, 1e-8 off in float64; compare with the defining formula instead
        Case("activation", "HardSwish", [x4 * 4], expect=lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
        Case("activation", "LogSoftmax", [x4 * 5]),
        Case("activation", "Gelu", [x4 * 3], opset=20,
             expect=lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2)))),
    ]
    cases += _nn_cases(x4)
    b3 = rand(2, 4, 7)
    cases += [
        Case("matmul", "Gemm", [rand(4, 8), st(rand(5, 8), np.float32), st(rand(5), np.float32)],
             {"transB": 1}, label="linear"),
        Case("matmul", "Gemm", [rand(8, 4), rand(8, 5), rand(4, 5)],
             {"transA": 1, "alpha": 0.5, "beta": 2.0}, label="transA_alpha_beta"),
        Case("matmul", "Gemm", [rand(4, 8), rand(8, 5)], label="no_c"),
        Case("matmul", "MatMul", [rand(2, 3, 4, 8), rand(8, 5)], label="broadcast"),
        Case("matmul", "MatMul", [rand(2, 1, 4, 8), rand(3, 8, 5)], label="batched"),
        Case("matmul", "MatMul", [rand(8), rand(2, 8, 5)], label="vector"),
        Case("reduce", "ReduceMean", [b3], {"axes": [-1]}),
        Case("reduce", "ReduceMean", [b3], {"axes": [1, 2], "keepdims": 0}, label="two"),
        Case("reduce", "ReduceMean", [b3, st([1])], opset=18, label="input"),
        Case("reduce", "ReduceMean", [b3], label="all"),
        Case("reduce", "ReduceSum", [b3, st([-1])], {"keepdims": 0}),
        Case("reduce", "ReduceSum", [b3], label="all"),
        Case("reduce", "ReduceMax", [b3], {"axes": [1]}),
    ]
    cases += _tensor_cases(x4)
    cases += _resize_cases()
    cases += _transformer_cases()
    cases += _export_cases()
    return cases


def _group_norm_2(x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """GroupNormalization of ``x`` (N, C, T) with 2 groups, per-channel scale and bias."""
    groups = x.reshape(x.shape[0], 2, -1)
    mean, var = groups.mean(-1, keepdims=True), groups.var(-1, keepdims=True)
    y = ((groups - mean) / np.sqrt(var + 1e-5)).reshape(x.shape)
    return y * scale[:, None] + bias[:, None]


def _transformer_cases() -> list[Case]:
    """Ops of the zoo's transformers (opset 17 and the fused opset-23 export) and magika."""
    x3, c4 = rand(2, 6, 8), rand(2, 4, 10)  # (batch, tokens, hidden), (batch, channels, time)
    q, k, v = rand(1, 4, 6, 8), rand(1, 2, 6, 8), rand(1, 2, 6, 8)  # grouped-query heads
    return [
        Case("elementwise", "And", [rand(5, 6) > 0, rand(6) > 0]),
        Case("nn", "InstanceNormalization", [c4, st(rand(4), np.float32),
                                             st(rand(4), np.float32)], {"epsilon": 1e-5}),
        # the reference evaluator computes opset-21 GroupNormalization's statistics in float32
        # (stash_type 1), 5.7e-8 from float64: compare with the defining formula instead
        Case("nn", "GroupNormalization", [c4, st(rand(4), np.float32), st(rand(4), np.float32)],
             {"num_groups": 2}, opset=21, expect=_group_norm_2),
        Case("nn", "GroupNormalization", [c4, st(rand(2), np.float32), st(rand(2), np.float32)],
             {"num_groups": 2}, opset=18, label="per_group"),
        Case("nn", "RMSNormalization", [x3, st(rand(8), np.float32)], {"epsilon": 1e-6},
             opset=23),
        Case("matmul", "Attention", [q, k, v], {"is_causal": 1}, opset=23, label="gqa_causal"),
        Case("matmul", "Attention", [rand(1, 4, 6, 8), rand(1, 4, 6, 8), rand(1, 4, 6, 8),
                                     rand(6, 6) > -0.5], opset=23, label="bool_mask"),
        Case("tensor", "GatherElements", [x3, st(np.arange(16).reshape(2, 1, 8) % 6)],
             {"axis": 1}),
        Case("tensor", "GatherND", [x3, st(np.array([[0, 5], [1, 2]]))]),
        Case("reduce", "ReduceL2", [c4, st([2])], {"keepdims": 1}, opset=18),
    ]


def _export_cases() -> list[Case]:
    """Ops of transformer exports whose ONNX node tests are not float32 (CumSum, Einsum,
    Trilu, OneHot, NonZero, GlobalLpPool, the bitwise family).
    """
    x3 = rand(2, 5, 6)
    u8 = np.array([[3, 5, 250], [0, 7, 128]], dtype=np.uint8)
    return [
        Case("reduce", "CumSum", [x3, st(1)], opset=14),
        Case("reduce", "CumSum", [x3, st(-1)], {"exclusive": 1, "reverse": 1}, opset=14,
             label="exclusive_reverse"),
        Case("reduce", "CumSum", [np.arange(12).reshape(3, 4), st(0)], opset=14, label="int"),
        Case("matmul", "Einsum", [rand(2, 3, 4), rand(2, 4, 5)], {"equation": "bij,bjk->bik"},
             opset=12),
        Case("matmul", "Einsum", [rand(3, 4)], {"equation": "ij->ji"}, opset=12,
             label="transpose"),
        Case("tensor", "Trilu", [x3, st(1)], opset=14),
        Case("tensor", "Trilu", [x3], {"upper": 0}, opset=14, label="lower"),
        Case("tensor", "OneHot", [np.array([[0, 3, -1], [5, 2, 1]]), st(4),
                                  st([-2.0, 7.0], np.float32)], {"axis": 1}, opset=11),
        Case("tensor", "NonZero", [np.array([[0, 1, 0], [2, 0, 3]], dtype=np.float32)]),
        Case("nn", "LpPool", [rand(2, 3, 7, 8)], {"p": 3, "kernel_shape": [3, 2],
             "strides": [2, 1], "pads": [1, 0, 1, 1], "dilations": [1, 2]}, opset=18),
        # the reference evaluator has no GlobalLpPool: its definition instead
        Case("nn", "GlobalLpPool", [rand(2, 3, 4, 5)], {"p": 3},
             expect=lambda x: np.cbrt((np.abs(x) ** 3).sum(axis=(2, 3), keepdims=True))),
        Case("elementwise", "BitwiseAnd", [u8, u8[::-1].copy()], opset=18),
        Case("elementwise", "BitwiseXor", [u8, u8[::-1].copy()], opset=18),
        Case("elementwise", "BitwiseNot", [u8], opset=18),
        Case("elementwise", "BitShift", [u8, np.full((2, 3), 2, dtype=np.uint8)],
             {"direction": "RIGHT"}, opset=11),
    ]


def _nn_cases(x4: np.ndarray) -> list[Case]:
    x = rand(2, 4, 9, 10)
    w = st(rand(6, 4, 3, 3, low=-0.5, high=0.5), np.float32)
    b = st(rand(6), np.float32)
    c = 4
    stats = [st(rand(c), np.float32), st(rand(c), np.float32), st(rand(c), np.float32),
             st(rand(c, low=0.5, high=2.0), np.float32)]
    return [
        Case("nn", "Conv", [x, w, b], {"pads": [1, 1, 1, 1]}, label="pad1_bias"),
        Case("nn", "Conv", [x, w], {"strides": [2, 2], "pads": [0, 1, 2, 1]}, label="asym"),
        Case("nn", "Conv", [x, w], {"dilations": [2, 2], "pads": [2, 2, 2, 2]}, label="dilated"),
        Case("nn", "Conv", [x, w], {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, label="same_u"),
        Case("nn", "Conv", [x, w], {"auto_pad": "SAME_LOWER", "strides": [2, 2]}, label="same_l"),
        Case("nn", "Conv", [x, w], {"auto_pad": "VALID"}, label="valid"),
        Case("nn", "Conv", [x, st(rand(4, 2, 3, 3), np.float32)], {"group": 2}, label="groups"),
        Case("nn", "Conv", [x, st(rand(4, 1, 5, 5), np.float32), st(rand(4), np.float32)],
             {"group": 4, "pads": [2, 2, 2, 2]}, label="depthwise"),
        Case("nn", "Conv", [rand(2, 3, 11), st(rand(5, 3, 3), np.float32)], {"pads": [1, 0]},
             label="1d"),
        Case("nn", "MaxPool", [x], {"kernel_shape": [3, 3], "strides": [2, 2],
                                    "pads": [1, 1, 1, 1]}),
        Case("nn", "MaxPool", [x - 2], {"kernel_shape": [2, 2], "strides": [2, 2],
                                        "pads": [1, 0, 0, 1]}, label="asym_negative"),
        Case("nn", "MaxPool", [x], {"kernel_shape": [3, 3], "strides": [2, 2],
                                    "ceil_mode": 1}, label="ceil"),
        Case("nn", "MaxPool", [x], {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                    "ceil_mode": 1}, label="ceil_pad"),
        Case("nn", "MaxPool", [x], {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}, label="sppf"),
        Case("nn", "MaxPool", [x], {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER",
                                    "strides": [2, 2]}, label="same"),
        Case("nn", "AveragePool", [x], {"kernel_shape": [3, 3], "strides": [2, 2],
                                        "pads": [1, 1, 1, 1]}, label="exclude_pad"),
        Case("nn", "AveragePool", [x], {"kernel_shape": [3, 3], "strides": [2, 2],
                                        "pads": [1, 1, 1, 1], "count_include_pad": 1},
             label="include_pad"),
        Case("nn", "AveragePool", [x], {"kernel_shape": [3, 3], "strides": [2, 2],
                                        "ceil_mode": 1}, label="ceil"),
        Case("nn", "AveragePool", [x], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                                        "pads": [1, 1, 1, 1], "count_include_pad": 1},
             label="ceil_include_pad"),
        Case("nn", "AveragePool", [x], {"kernel_shape": [3, 2], "strides": [2, 1], "ceil_mode": 1,
                                        "pads": [0, 1, 2, 0], "count_include_pad": 1},
             label="ceil_include_asym_pad"),
        Case("nn", "MaxPool", [x - 2], {"kernel_shape": [2, 3], "dilations": [2, 2],
                                        "pads": [1, 0, 0, 2]}, label="dilation_asym_negative"),
        Case("nn", "MaxPool", [x], {"kernel_shape": [3, 3], "strides": [2, 2],
                                    "dilations": [2, 1], "ceil_mode": 1}, label="dilation_ceil"),
        Case("nn", "MaxPool", [x[:, :, 0]], {"kernel_shape": [3], "dilations": [3],
                                             "strides": [2], "pads": [1, 2]}, label="dilation_1d"),
        Case("nn", "AveragePool", [x], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1,
                                        "pads": [1, 1, 1, 1]}, label="ceil_drop_last"),
        Case("nn", "AveragePool", [x], {"kernel_shape": [2, 2], "strides": [2, 2]}, label="2x2"),
        Case("nn", "Conv", [rand(1, 2, 5, 6, 7), st(rand(3, 2, 3, 3, 3), np.float32)],
             {"pads": [1, 0, 1, 1, 0, 1]}, label="3d"),
        Case("nn", "MaxPool", [rand(2, 3, 11)], {"kernel_shape": [3], "strides": [2],
                                                 "pads": [1, 0]}, label="1d"),
        Case("nn", "AveragePool", [rand(1, 2, 5, 6, 7)], {"kernel_shape": [2, 2, 2],
                                                          "strides": [2, 2, 2]}, label="3d"),
        Case("nn", "GlobalAveragePool", [x]),
        Case("nn", "GlobalMaxPool", [x]),
        Case("nn", "BatchNormalization", [x] + stats, {"epsilon": 1e-3}),
        Case("nn", "LayerNormalization", [rand(2, 5, 8) * 3, st(rand(8), np.float32),
                                          st(rand(8), np.float32)], {"epsilon": 1e-5}),
        Case("nn", "LayerNormalization", [x4, st(rand(5, 6), np.float32)], {"axis": 2},
             label="axis2_no_bias"),
    ]


def _tensor_cases(x4: np.ndarray) -> list[Case]:
    return [
        Case("tensor", "Concat", [x4, rand(2, 1, 5, 6)], {"axis": 1}),
        Case("tensor", "Split", [x4, st([2, 4])], {"axis": 3}, outputs=2),
        Case("tensor", "Split", [x4], {"axis": 2}, outputs=3, opset=13, label="equal"),
        Case("tensor", "Split", [x4], {"axis": 2, "num_outputs": 3}, outputs=3, opset=18,
             label="num_outputs"),
        Case("tensor", "Slice", [x4, st([1, -4]), st([2**62, -1]), st([1, 3])], label="huge_end"),
        Case("tensor", "Slice", [x4, st([-1, 0]), st([-2**62, 5]), st([2, 3]), st([-2, 2])],
             label="steps"),
        Case("tensor", "Slice", [x4, st([0]), st([1])], label="no_axes"),
        Case("tensor", "Gather", [x4, st(1)], {"axis": 1}, label="scalar"),
        Case("tensor", "Gather", [x4, st([4, -1, 0])], {"axis": 3}, label="vector_negative"),
        Case("tensor", "Gather", [rand(10, 4), st([[1, 2], [0, 9]])], label="matrix"),
        Case("tensor", "Gather", [x4, np.array([2, 0], dtype=np.int64)], {"axis": 2},
             label="dynamic"),
        Case("tensor", "Reshape", [x4, st([0, -1, 6])]),
        Case("tensor", "Reshape", [x4, st([2, 0, 30])], label="zero"),
        Case("tensor", "Transpose", [x4], {"perm": [0, 2, 3, 1]}),
        Case("tensor", "Transpose", [x4], label="reverse"),
        Case("tensor", "Flatten", [x4]),
        Case("tensor", "Flatten", [x4], {"axis": 0}, label="axis0"),
        Case("tensor", "Flatten", [x4], {"axis": -2}, label="neg"),
        Case("tensor", "Squeeze", [rand(2, 1, 3, 1), st([1, -1])]),
        Case("tensor", "Squeeze", [rand(2, 1, 3, 1)], label="all"),
        Case("tensor", "Unsqueeze", [rand(2, 3), st([0, -1])]),
        Case("tensor", "Expand", [rand(3, 1), st([2, 1, 4])]),
        Case("tensor", "Expand", [rand(2, 3, 4), st([3, 1])], label="bidirectional"),
        Case("tensor", "Tile", [rand(2, 3), st([2, 3])]),
        Case("tensor", "Pad", [x4, st([0, 0, 1, 2, 0, 0, 3, 0]), st(0.5, np.float32)]),
        Case("tensor", "Pad", [x4, st([0, 1, 0, -1, 0, 0, 0, -2])], label="negative",  # crops
             expect=lambda x, pads: np.pad(x[..., 1:-2], [(0, 0), (1, 0), (0, 0), (0, 0)])),
        Case("tensor", "Pad", [x4, st([1, 2, 2, 1]), None, st([2, -1])], {"mode": "reflect"},
             label="reflect_axes", opset=18),
        Case("tensor", "Pad", [x4, st([0, 0, 1, 2, 0, 0, 2, 1])], {"mode": "edge"}, label="edge"),
        Case("tensor", "ConstantOfShape", [st([2, 3])], {"value": np.array([1.5], np.float32)}),
        Case("tensor", "ConstantOfShape", [st([4])], label="default"),
        Case("tensor", "Range", [st(0.5, np.float32), st(3.0, np.float32),
                                 st(0.25, np.float32)]),
    ]


def _resize_cases() -> list[Case]:
    x = rand(1, 3, 5, 7)
    nearest = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
               "nearest_mode": "floor"}
    empty = st([], np.float32)
    return [
        Case("resize", "Resize", [x, empty, st([1, 1, 2, 2], np.float32)], nearest, label="x2"),
        Case("resize", "Resize", [x, empty, st([1, 1, 1.5, 2.5], np.float32)], nearest,
             label="frac"),
        Case("resize", "Resize", [x, empty, None, st([1, 3, 12, 9])], nearest, label="sizes"),
        Case("resize", "Resize", [x, empty, st([1, 1, 2, 2], np.float32)], {"mode": "linear"},
             label="linear_half_pixel"),
        Case("resize", "Resize", [x, empty, None, st([1, 3, 8, 11])],
             {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
             label="linear_align", fp64_rtol=FP64_RESIZE_RTOL),
        Case("resize", "Resize", [x, empty, None, st([1, 3, 8, 11])], {"mode": "linear"},
             label="linear_sizes", fp64_rtol=FP64_RESIZE_RTOL),
        Case("resize", "Resize", [x, empty, None, st([1, 3, 3, 4])], nearest, label="down_sizes"),
        Case("resize", "Resize", [x, empty, st([1, 1, 2, 2], np.float32)], {"mode": "nearest"},
             label="nearest_default"),
        Case("resize", "Resize", [x, empty, st([1, 1, 1.5, 1.5], np.float32)],
             {"mode": "nearest", "nearest_mode": "round_prefer_ceil"}, label="nearest_ceil"),
        Case("resize", "Resize", [x, empty, None, st([1, 3, 8, 11])],
             {"mode": "nearest", "coordinate_transformation_mode": "align_corners"},
             label="nearest_align"),
        Case("resize", "Resize", [x, empty, None, st([1, 3, 3, 4])],
             {"mode": "nearest", "coordinate_transformation_mode": "pytorch_half_pixel",
              "nearest_mode": "ceil"}, label="nearest_down_ceil"),
        Case("resize", "Resize", [x, empty, st([1, 1, 2, 2], np.float32)],
             {"mode": "linear", "coordinate_transformation_mode": "asymmetric"},
             label="linear_asym"),
        Case("resize", "Resize", [x, empty, st([1, 1, 2, 2], np.float32)],
             {"mode": "cubic", "coordinate_transformation_mode": "half_pixel"}, label="cubic"),
        Case("resize", "Upsample", [x, st([1, 1, 2, 3], np.float32)], {"mode": "nearest"},
             opset=9),
        # the reference evaluator cannot run Resize-10 (it expects the opset-11 inputs)
        Case("resize", "Resize", [x, st([1, 1, 2, 2], np.float32)], {"mode": "nearest"},
             opset=10, label="opset10", expect=lambda x, s: x.repeat(2, axis=2).repeat(2, axis=3)),
    ]
# fmt: on


CASES = _cases()


@pytest.fixture(scope="module")
def adapters() -> dict[str, Any]:
    return {dtype: make_adapter({"dtype": dtype}) for dtype in ("float32", "float64")}


def measure(case: Case, adapter: Any) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """Run the float32 model of ``case`` in paddle with ``adapter`` and the float64 reference.

    Returns:
        (paddle output, reference output, magnitude) per output, where magnitude is the
        largest absolute float value among the case's inputs (see :func:`rel_error`).
    """
    values = [v.value if isinstance(v, Static) else v for v in case.inputs if v is not None]
    expected = reference(case)
    got = run_case(case, adapter)  # the float32 model: the float64 adapter casts it (settings)
    magnitude = max((float(np.abs(v).max()) for v in values if v.dtype.kind == "f" and v.size),
                    default=0.0)  # fmt: skip
    return [(out, ref, magnitude) for out, ref in zip(got, expected, strict=True)]


def rel_error(got: np.ndarray, ref: np.ndarray, magnitude: float = 0.0) -> float:
    """max |got - ref| / max(max |ref|, magnitude); 0 when both are all zero.

    Dividing by the larger of the output and input magnitudes keeps the measure meaningful
    where an output cancels to near zero (a mean of mixed-sign values) and where it grows
    beyond the inputs (a sum).
    """
    if not ref.size:
        return 0.0
    diff = float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max())
    scale = max(float(np.abs(ref).max()), magnitude)
    return diff / scale if scale else diff


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[c.family + "/" + c.id for c in CASES])
def test_op_matches_float64_reference(case: Case, dtype: str, adapters: dict[str, Any]) -> None:
    tolerance = max(FP64_RTOL, case.fp64_rtol) if dtype == "float64" else FP32_RTOL
    for got, ref, magnitude in measure(case, adapters[dtype]):
        assert got.shape == ref.shape
        if ref.dtype.kind == "f":
            expected_dtype = np.float64 if dtype == "float64" else np.float32
            assert got.dtype == expected_dtype
            assert rel_error(got, ref, magnitude) <= tolerance
        else:
            assert got.dtype == ref.dtype
            np.testing.assert_array_equal(got, ref)


def test_required_and_zoo_ops_are_translated_and_tested(adapters: dict[str, Any]) -> None:
    required = set(REQUIRED_OPS)
    zoo_ops = Path(__file__).parents[3] / "docs" / "zoo-ops.md"
    if zoo_ops.exists():
        rows = [line.split("|")[1].strip() for line in zoo_ops.read_text().splitlines()
                if line.startswith("| ") and not line.startswith("| op ")]  # fmt: skip
        # Constant and Shape (of static shapes) are folded by GraphProgram, never translated
        required |= set(rows) - {"Constant", "Shape"}
    assert required <= set(registered_ops("paddle"))
    assert required <= {case.op for case in CASES}


def _chain_model(dtype: Any) -> onnx.ModelProto:
    """Conv -> Relu -> MaxPool -> Resize -> Flatten -> Gemm, as torch.onnx exports it."""
    weights = {"w": CHAIN_W, "b": CHAIN_B, "fc_w": CHAIN_FC_W, "fc_b": CHAIN_FC_B}
    inits = [numpy_helper.from_array(v.astype(dtype), k) for k, v in weights.items()]
    inits += [
        numpy_helper.from_array(np.array([], np.float32), "roi"),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], "conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], "relu"),
        helper.make_node("MaxPool", ["r"], ["p"], "pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Resize", ["p", "roi", "scales"], ["u"], "up", mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Flatten", ["u"], ["f"], "flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], "fc", transB=1),
    ]  # fmt: skip
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", elem, [2, 3, 8, 8])],
        [helper.make_tensor_value_info("y", elem, [2, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


CHAIN_W, CHAIN_B = rand(8, 3, 3, 3, low=-0.5, high=0.5), rand(8)
CHAIN_FC_W, CHAIN_FC_B = rand(10, 8 * 8 * 8, low=-0.1, high=0.1), rand(10)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_chain_matches_reference(dtype: str, adapters: dict[str, Any]) -> None:
    x = rand(2, 3, 8, 8)
    ref = ReferenceEvaluator(_chain_model(np.float64)).run(None, {"x": x.astype(np.float64)})[0]
    program = GraphProgram(_chain_model(np.float32), adapters[dtype])
    assert program.op_types == ["Conv", "Relu", "MaxPool", "Resize", "Flatten", "Gemm"]
    got = adapters[dtype].to_numpy(program.run({"x": x})["y"])
    assert got.dtype == np.dtype(dtype)
    assert got.shape == (2, 10)
    assert rel_error(got, ref) <= (FP64_RTOL if dtype == "float64" else FP32_RTOL)


def test_unknown_op_raises_missing_translator(adapters: dict[str, Any]) -> None:
    # Bernoulli draws random numbers: no translator, by design (runs must be deterministic)
    model, _ = build(Case("x", "Bernoulli", [rand(2, 3)]), np.float32, node_name="n0")
    with pytest.raises(MissingTranslatorError) as info:
        GraphProgram(model, adapters["float32"])
    assert str(info.value) == "op Bernoulli (opset 17, node n0) has no paddle translator"


def test_unsupported_variant_is_a_usage_error(adapters: dict[str, Any]) -> None:
    scales = st([1, 1, 2, 2], np.float32)
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_half_pixel_for_nn"}
    case = Case("resize", "Resize", [rand(1, 1, 4, 4), st([], np.float32), scales], attrs)
    model, feeds = build(case, np.float32)
    with pytest.raises(UsageError, match="linear Resize with tf_half_pixel_for_nn"):
        GraphProgram(model, adapters["float32"]).run(feeds)


def test_settings() -> None:
    adapter = make_adapter({"dtype": "float64", "threads": 2})
    assert adapter.settings()["dtype"] == "float64"
    assert adapter.settings()["threads"] == 2
    with pytest.raises(UsageError, match="unknown paddle settings"):
        make_adapter({"precision": "bf16"})
    with pytest.raises(UsageError, match="dtype"):
        make_adapter({"dtype": "float16"})


def test_package_import_does_not_import_paddle() -> None:
    code = (
        "import sys, anpred.translate.paddle as p; assert 'paddle' not in sys.modules; "
        "from anpred.translate.paddle.adapter import import_paddle; "
        "print(import_paddle().__file__)"
    )
    env = dict(os.environ, GLOG_minloglevel="2")
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith(os.path.join("site-packages", "paddle", "__init__.py"))
