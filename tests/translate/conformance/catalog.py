"""The conformance catalogue: which shapes and attributes every op is tested with.

Cases cover the attribute variants ONNX allows for the op and that exported CNNs, ViTs and
YOLOs use (opset 17 unless a case says otherwise). Input ranges keep every op in its
well-conditioned domain (positive Log/Sqrt inputs, denominators away from zero), so that
the measured float32 noise describes rounding, not cancellation.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
from onnx import TensorProto

from conformance.cases import (
    FLOAT_TYPE,
    CaseInput,
    OpCase,
    Rand,
    feed,
    make_case,
    static,
    weight,
)

_I64_MAX = np.iinfo(np.int64).max
_I64_MIN = np.iinfo(np.int64).min
_ACT = {"low": -5.0, "high": 5.0}  # activations: the interesting region and the saturations
_POSITIVE = {"low": 0.5, "high": 2.0}  # denominators, variances


def ints(*shape: int, low: int, high: int) -> Rand:
    """Return a random int64 graph input in ``[low, high]``."""
    return feed(*shape, low=low, high=high, kind="int")


def grid(*shape: int) -> Rand:
    """Return a float32 graph input holding integers 0..3, so that equal values occur."""
    return feed(*shape, low=0, high=3, kind="grid")


def mask(*shape: int) -> Rand:
    """Return a random bool graph input."""
    return feed(*shape, kind="bool")


def scalar(value: float) -> CaseInput:
    """Return a float scalar initializer (it follows the model's float dtype)."""
    return static(value, np.float32)


def scales(*values: float) -> CaseInput:
    """Return Resize scales: float32 in both copies (ONNX types scales as float only)."""
    return static(list(values), np.float32, fixed_dtype=True)


def _elementwise() -> list[OpCase]:
    c = make_case
    cases = []
    for op in ("Add", "Sub", "Mul"):
        cases += [
            c(op, "same_shape", [feed(2, 3, 4, 5), feed(2, 3, 4, 5)]),
            c(op, "broadcast_last", [feed(2, 3, 4, 5), feed(5)]),
            c(op, "broadcast_both", [feed(2, 3, 1, 5), feed(1, 3, 4, 1)]),
            c(op, "scalar_const", [feed(2, 8, 6), weight()]),
            c(op, "channel_const", [feed(1, 4, 5, 5), weight(4, 1, 1)]),
        ]
    cases += [
        c("Div", "same_shape", [feed(2, 3, 4, 5), feed(2, 3, 4, 5, **_POSITIVE)]),
        c("Div", "broadcast", [feed(2, 3, 4, 5), feed(3, 1, 1, **_POSITIVE)]),
        c("Div", "scalar_const", [feed(4, 7), weight(**_POSITIVE)]),
        c("Div", "const_numerator", [weight(1, 6), feed(3, 6, **_POSITIVE)]),
        c("Pow", "tensor_exponent", [feed(2, 3, 4, **_POSITIVE), feed(2, 3, 4, low=-2, high=2)]),
        c("Pow", "square_const", [feed(2, 3, 8), scalar(2.0)]),
        c("Pow", "sqrt_const", [feed(2, 3, 8, low=0.0, high=3.0), scalar(0.5)]),
        c("Pow", "int_exponent", [feed(4, 5, low=-2, high=2), static(3)]),
        c("Mod", "int_python_sign", [ints(4, 3, low=-20, high=20), static([3, -4, 5])]),
        c("Mod", "int_fmod", [ints(4, 3, low=-20, high=20), static([3, -4, 5])], fmod=1),
        c("Mod", "float_fmod", [feed(3, 5, low=-10, high=10), weight(5, **_POSITIVE)], fmod=1),
        c("Mod", "int_dynamic", [ints(6, low=-50, high=50), ints(6, low=1, high=9)]),
    ]
    unary = {
        "Sqrt": (0.01, 4.0), "Erf": (-3.0, 3.0), "Exp": (-5.0, 5.0), "Log": (0.01, 10.0),
        "Neg": (-1.0, 1.0), "Abs": (-1.0, 1.0), "Tanh": (-4.0, 4.0), "Sigmoid": (-8.0, 8.0),
        "Relu": (-1.0, 1.0), "HardSwish": (-5.0, 5.0),
    }  # fmt: skip
    for op, (low, high) in unary.items():
        cases += [
            c(op, "nchw", [feed(2, 4, 8, 8, low=low, high=high)]),
            c(op, "vector", [feed(37, low=low, high=high)]),
            c(op, "tokens", [feed(1, 10, 24, low=low, high=high)]),
        ]
    return cases


def _activations() -> list[OpCase]:
    c = make_case
    x = feed(2, 4, 8, 8, **_ACT)
    logits = {"low": -10.0, "high": 10.0}
    return [
        c("LeakyRelu", "default_alpha", [x]),
        c("LeakyRelu", "alpha_0.1", [x], alpha=0.1),
        c("LeakyRelu", "alpha_2", [feed(5, 9, **_ACT)], alpha=2.0),
        c("HardSigmoid", "default", [x]),
        c("HardSigmoid", "torch_alpha", [x], alpha=1.0 / 6.0),
        c("HardSigmoid", "alpha_beta", [feed(5, 9, **_ACT)], alpha=0.3, beta=0.6),
        c("Clip", "min_max", [x, scalar(-1.0), scalar(2.0)]),
        c("Clip", "relu6", [feed(2, 4, 8, 8, low=-3, high=9), scalar(0.0), scalar(6.0)]),
        c("Clip", "min_only", [feed(3, 7, **_ACT), scalar(0.5)]),
        c("Clip", "max_only", [feed(3, 7, **_ACT), None, scalar(0.5)]),
        c("Clip", "no_bounds", [feed(3, 7, **_ACT)]),
        c("Softmax", "last_axis", [feed(2, 3, 10, **logits)]),
        c("Softmax", "axis_1", [feed(2, 5, 4, 4, **logits)], axis=1),
        c("Softmax", "axis_0", [feed(6, 3, **logits)], axis=0),
        c("Softmax", "attention", [feed(1, 4, 16, 16, **logits)], axis=-1),
        # The ONNX reference evaluator ignores the opset < 13 flattening semantics.
        c("Softmax", "opset11_flatten", [feed(2, 3, 4, **_ACT)], axis=1, opset=11,
          reference="onnxruntime"),
    ]  # fmt: skip


def _selection() -> list[OpCase]:
    c = make_case
    return [
        c("Where", "same_shape", [mask(3, 4), feed(3, 4), feed(3, 4)]),
        c("Where", "broadcast", [mask(1, 4), feed(2, 3, 4), feed(4)]),
        c("Where", "const_branch", [mask(2, 5), feed(2, 5), weight()]),
        c("Equal", "float", [grid(3, 4, 5), grid(3, 4, 5)]),
        c("Equal", "broadcast", [grid(3, 4, 5), grid(5)]),
        c("Equal", "int64", [ints(6, 7, low=0, high=3), ints(6, 7, low=0, high=3)]),
        c("Min", "two", [feed(3, 4, 5), feed(3, 4, 5)]),
        c("Min", "broadcast_three", [feed(3, 4, 5), feed(4, 1), feed(5)]),
        c("Min", "one", [feed(2, 6)]),
        c("Max", "two", [feed(3, 4, 5), feed(3, 4, 5)]),
        c("Max", "broadcast_three", [feed(3, 4, 5), feed(4, 1), feed(5)]),
        c("Max", "const", [feed(2, 6), weight()]),
        c("Identity", "float", [feed(2, 3, 4, 5)]),
        c("Identity", "int64", [ints(4, 5, low=-9, high=9)]),
        c("Dropout", "inference", [feed(2, 3, 4, 5)]),
        c("Dropout", "ratio_input", [feed(2, 16), scalar(0.1)]),
        c("Dropout", "with_mask", [feed(3, 8)], n_outputs=2),
        c("Cast", "float_to_int64", [feed(3, 4, low=-10, high=10)], to=TensorProto.INT64),
        c("Cast", "float_to_int32", [feed(3, 4, low=-10, high=10)], to=TensorProto.INT32),
        c("Cast", "float_to_bool", [grid(3, 4)], to=TensorProto.BOOL),
        c("Cast", "int64_to_float", [ints(3, 4, low=-100, high=100)], to=FLOAT_TYPE),
        c("Cast", "bool_to_float", [mask(3, 4)], to=FLOAT_TYPE),
        c("Cast", "float_to_float", [feed(2, 3, 4)], to=FLOAT_TYPE),
    ]


def _conv(case_id: str, x: tuple[int, ...], w: tuple[int, ...], bias: bool, **attrs: Any) -> OpCase:
    inputs = [feed(*x), weight(*w)] + ([weight(w[0])] if bias else [])
    return make_case("Conv", case_id, inputs, **attrs)


def _convolutions() -> list[OpCase]:
    p1, p2 = [1, 1, 1, 1], [2, 2, 2, 2]
    return [
        _conv("3x3_pad1_bias", (1, 4, 8, 8), (8, 4, 3, 3), True, pads=p1),
        _conv("stride2_nobias", (2, 3, 9, 9), (6, 3, 3, 3), False, strides=[2, 2]),
        _conv("1x1", (1, 16, 6, 6), (8, 16, 1, 1), True, kernel_shape=[1, 1]),
        _conv("groups2", (1, 8, 7, 7), (6, 4, 3, 3), True, group=2, pads=p1),
        _conv("depthwise", (1, 6, 8, 8), (6, 1, 3, 3), True, group=6, pads=p1),
        _conv("depthwise_stride2", (1, 4, 9, 9), (8, 1, 5, 5), False, group=4, strides=[2, 2],
              pads=p2),
        # PP-OCRv4 det: strided depthwise with pads that are not TensorFlow's SAME (its
        # grappler aborted the process on the explicit-padding kernel)
        _conv("depthwise_s2_pad1_even", (1, 32, 20, 20), (32, 1, 3, 3), True, group=32,
              strides=[2, 2], pads=p1),
        _conv("asym_pads", (1, 3, 8, 8), (4, 3, 3, 3), True, pads=[0, 1, 1, 2]),
        _conv("dilation2", (1, 3, 10, 10), (4, 3, 3, 3), False, dilations=[2, 2], pads=p2),
        _conv("same_upper_s2", (1, 3, 9, 9), (4, 3, 3, 3), False, auto_pad="SAME_UPPER",
              strides=[2, 2]),
        _conv("same_lower_k4", (1, 3, 8, 8), (4, 3, 4, 4), False, auto_pad="SAME_LOWER"),
        _conv("valid", (1, 3, 8, 8), (4, 3, 3, 3), True, auto_pad="VALID"),
        _conv("rect_kernel", (1, 3, 7, 10), (5, 3, 3, 2), False, strides=[1, 2],
              pads=[1, 0, 1, 1]),
        _conv("stem_6x6_s2", (1, 3, 16, 16), (8, 3, 6, 6), True, strides=[2, 2], pads=p2),
        _conv("conv1d", (2, 3, 16), (4, 3, 5), True, pads=[2, 2]),
    ]  # fmt: skip


def _pools() -> list[OpCase]:
    c = make_case
    k2, k3, s2, p1 = [2, 2], [3, 3], [2, 2], [1, 1, 1, 1]
    return [
        c("MaxPool", "k2s2", [feed(1, 4, 8, 8)], kernel_shape=k2, strides=s2),
        c("MaxPool", "k3s2p1", [feed(1, 4, 9, 9)], kernel_shape=k3, strides=s2, pads=p1),
        c("MaxPool", "sppf_k5s1p2", [feed(1, 4, 8, 8)], kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
        c("MaxPool", "ceil_k3s2", [feed(1, 2, 8, 8)], kernel_shape=k3, strides=s2, ceil_mode=1),
        c("MaxPool", "ceil_k2s2_odd", [feed(1, 2, 7, 9)], kernel_shape=k2, strides=s2,
          ceil_mode=1),
        c("MaxPool", "asym_pads_s2", [feed(1, 2, 8, 8)], kernel_shape=k3, strides=s2,
          pads=[0, 1, 1, 0]),
        # The reference evaluator reads 2-D pads as (top, bottom, left, right) at unit strides.
        c("MaxPool", "asym_pads_s1", [feed(1, 2, 8, 8)], kernel_shape=k2, pads=[0, 0, 1, 1],
          reference="onnxruntime"),
        c("MaxPool", "same_upper", [feed(1, 2, 7, 7)], kernel_shape=k3, strides=s2,
          auto_pad="SAME_UPPER"),
        c("MaxPool", "dilation2", [feed(1, 2, 9, 9)], kernel_shape=k2, dilations=[2, 2]),
        c("MaxPool", "pool1d", [feed(2, 3, 11)], kernel_shape=[3], strides=[2]),
        # the Indices output (issue 18): flat over the whole tensor, row- or column-major
        c("MaxPool", "indices", [feed(2, 3, 6, 6)], kernel_shape=k3, strides=s2, pads=p1,
          n_outputs=2),
        c("MaxPool", "indices_col_major", [feed(2, 3, 4, 6)], kernel_shape=k2, strides=s2,
          storage_order=1, n_outputs=2),
        c("MaxPool", "indices_ceil", [feed(1, 2, 7, 7)], kernel_shape=k3, strides=s2, pads=p1,
          ceil_mode=1, n_outputs=2),
        # 3-D pooling (issue 18: tensorflow's max_pool3d / avg_pool3d)
        c("MaxPool", "pool3d_k2s2", [feed(1, 2, 6, 6, 6)], kernel_shape=[2, 2, 2],
          strides=[2, 2, 2]),
        c("MaxPool", "pool3d_pads_ceil", [feed(1, 2, 5, 7, 6)], kernel_shape=[3, 3, 3],
          strides=[2, 2, 2], pads=[1] * 6, ceil_mode=1),
        c("MaxPool", "pool3d_dilation2", [feed(1, 2, 7, 7, 7)], kernel_shape=[2, 2, 2],
          dilations=[2, 2, 2]),
        c("AveragePool", "k2s2", [feed(1, 4, 8, 8)], kernel_shape=k2, strides=s2),
        c("AveragePool", "k3s1p1_exclude_pad", [feed(1, 4, 6, 6)], kernel_shape=k3, pads=p1),
        c("AveragePool", "k3s1p1_include_pad", [feed(1, 4, 6, 6)], kernel_shape=k3, pads=p1,
          count_include_pad=1),
        c("AveragePool", "ceil_include_pad", [feed(1, 2, 7, 7)], kernel_shape=k3, strides=s2,
          pads=p1, ceil_mode=1, count_include_pad=1),
        c("AveragePool", "ceil_exclude_pad", [feed(1, 2, 8, 8)], kernel_shape=k3, strides=s2,
          ceil_mode=1),
        c("AveragePool", "asym_pads", [feed(1, 2, 8, 8)], kernel_shape=k2, pads=[0, 1, 1, 0],
          count_include_pad=1),
        c("AveragePool", "same_upper", [feed(1, 2, 7, 7)], kernel_shape=k3, strides=s2,
          auto_pad="SAME_UPPER"),
        # dilated windows (opset 19): no torch / paddle / tensorflow average-pool kernel has
        # them (issue 18)
        c("AveragePool", "dilation2", [feed(1, 2, 9, 9)], kernel_shape=k2, dilations=[2, 2],
          opset=19),
        c("AveragePool", "dil2_s2_ceil_incl_pad", [feed(1, 2, 9, 9)], kernel_shape=k3,
          strides=s2, pads=p1, dilations=[2, 2], ceil_mode=1, count_include_pad=1, opset=19),
        c("AveragePool", "dil2_s2_excl_pad", [feed(1, 2, 10, 10)], kernel_shape=k2,
          strides=s2, pads=p1, dilations=[2, 2], opset=19),
        c("AveragePool", "pool3d_include_pad", [feed(1, 2, 6, 6, 6)], kernel_shape=[3, 3, 3],
          strides=[2, 2, 2], pads=[1] * 6, count_include_pad=1),
        c("AveragePool", "pool3d_exclude_pad_ceil", [feed(1, 2, 7, 7, 7)],
          kernel_shape=[3, 3, 3], strides=[2, 2, 2], pads=[1] * 6, ceil_mode=1),
        c("AveragePool", "pool3d_dilation2", [feed(1, 2, 7, 7, 7)], kernel_shape=[2, 2, 2],
          dilations=[2, 2, 2], opset=19),
        c("GlobalAveragePool", "nchw", [feed(2, 8, 7, 7)]),
        c("GlobalAveragePool", "large_hw", [feed(1, 4, 32, 32)]),
        c("GlobalAveragePool", "1x1", [feed(1, 16, 1, 1)]),
        c("GlobalAveragePool", "ncw", [feed(2, 4, 9)]),
    ]  # fmt: skip


def _batch_norm(case_id: str, x: tuple[int, ...], var: Rand, **attrs: Any) -> OpCase:
    n = x[1]
    inputs = [feed(*x), weight(n), weight(n), weight(n), var]
    return make_case("BatchNormalization", case_id, inputs, **attrs)


def _normalisations() -> list[OpCase]:
    c = make_case
    return [
        _batch_norm("nchw", (2, 4, 5, 5), weight(4, **_POSITIVE)),
        _batch_norm("eps1e-3", (1, 8, 3, 3), weight(8, **_POSITIVE), epsilon=1e-3),
        _batch_norm("nc", (6, 5), weight(5, **_POSITIVE)),
        _batch_norm("tiny_var", (1, 3, 4, 4), weight(3, low=1e-4, high=1e-3)),
        c("LayerNormalization", "last_axis", [feed(2, 5, 16), weight(16), weight(16)]),
        c("LayerNormalization", "vit_eps1e-6", [feed(1, 10, 32), weight(32), weight(32)],
          epsilon=1e-6),
        c("LayerNormalization", "axis1", [feed(2, 3, 4, 5), weight(3, 4, 5), weight(3, 4, 5)],
          axis=1),
        c("LayerNormalization", "no_bias", [feed(3, 12), weight(12)], axis=-1),
        c("LayerNormalization", "offset_input",
          [feed(2, 8, low=10.0, high=11.0), weight(8), weight(8)]),
        # ONNX backend tests (issue 18): paddle's kernel rejects axis 0 and epsilon > 1e-3,
        # and its translator lacked the Mean / InvStdDev outputs.
        c("LayerNormalization", "axis0", [feed(3, 4), weight(3, 4), weight(3, 4)], axis=0),
        c("LayerNormalization", "eps0.1", [feed(2, 3, 5), weight(5), weight(5)], epsilon=0.1),
        c("LayerNormalization", "mean_inv_std", [feed(2, 3, 5), weight(3, 5), weight(3, 5)],
          axis=1, n_outputs=3),
    ]  # fmt: skip


def _linear() -> list[OpCase]:
    c = make_case
    return [
        c("Gemm", "bias_vector", [feed(4, 6), weight(6, 5), weight(5)]),
        c("Gemm", "transB_linear", [feed(3, 16), weight(8, 16), weight(8)], transB=1),
        c("Gemm", "transA", [feed(6, 4), weight(6, 5), weight(5)], transA=1),
        # a (1, N) bias with transA: tensorflow's fused MatMul rejected it (issue 18)
        c("Gemm", "transA_row_bias", [feed(6, 4), weight(6, 5), weight(1, 5)], transA=1),
        c("Gemm", "alpha_beta", [feed(4, 6), weight(6, 5), weight(4, 5)], alpha=0.5, beta=2.0),
        c("Gemm", "no_c", [feed(4, 6), weight(6, 5)]),
        c("Gemm", "scalar_c", [feed(4, 6), weight(5, 6), weight()], transB=1, beta=0.5),
        c("MatMul", "2d", [feed(3, 4), feed(4, 5)]),
        c("MatMul", "batched", [feed(2, 3, 4), feed(2, 4, 5)]),
        c("MatMul", "broadcast_batch", [feed(2, 1, 3, 4), feed(1, 5, 4, 6)]),
        c("MatMul", "weight_rhs", [feed(2, 7, 16), weight(16, 8)]),
        c("MatMul", "attention_scores", [feed(1, 4, 10, 8), feed(1, 4, 8, 10)]),
        c("MatMul", "matrix_vector", [feed(3, 4), feed(4)]),
        c("MatMul", "vector_matrix", [feed(4), feed(4, 5)]),
        c("MatMul", "vector_vector", [feed(4), feed(4)]),  # tensorflow failed it (issue 18)
        c("MatMul", "long_reduction", [feed(2, 512), weight(512, 3)]),
    ]


def _reductions() -> list[OpCase]:
    c = make_case
    return [
        c("ReduceMean", "spatial_keepdims", [feed(2, 3, 4, 5)], axes=[2, 3]),
        c("ReduceMean", "last_nokeep", [feed(2, 3, 16)], axes=[-1], keepdims=0),
        c("ReduceMean", "all", [feed(3, 4, 5)]),
        c("ReduceMean", "opset18_axes_input", [feed(2, 6, 7), static([1])], opset=18),
        c("ReduceSum", "axes_input", [feed(2, 3, 4, 5), static([1])]),
        c("ReduceSum", "nokeep_two_axes", [feed(2, 3, 4, 5), static([0, -1])], keepdims=0),
        c("ReduceSum", "all", [feed(4, 50)]),
        c("ReduceSum", "noop_empty_axes", [feed(3, 4)], noop_with_empty_axes=1),
        c("ReduceMax", "axis1_nokeep", [feed(2, 5, 6)], axes=[1], keepdims=0),
        c("ReduceMax", "spatial", [feed(1, 3, 8, 8)], axes=[2, 3]),
        c("ReduceMax", "all", [feed(4, 9)]),
    ]


def _slicing() -> list[OpCase]:
    c = make_case
    top, bottom = static([_I64_MAX]), static([_I64_MIN])
    return [
        c("Split", "equal_two", [feed(1, 8, 3, 3)], axis=1, n_outputs=2),
        c("Split", "sizes_axis2", [feed(2, 3, 6), static([2, 3, 1])], axis=2, n_outputs=3),
        c("Split", "sizes_last", [feed(2, 7), static([4, 3])], axis=-1, n_outputs=2),
        c("Split", "default_axis", [feed(6, 2)], n_outputs=3),
        c("Split", "opset18_num_outputs", [feed(2, 7)], axis=1, num_outputs=3, n_outputs=3,
          opset=18),
        c("Slice", "basic", [feed(5, 6), static([1, 2]), static([4, 5])]),
        c("Slice", "axes_steps", [feed(2, 8, 9), static([0, 1]), static([8, 9]), static([1, 2]),
                                  static([2, 3])]),
        c("Slice", "negative_starts", [feed(4, 10), static([-3]), top, static([1])]),
        c("Slice", "huge_end", [feed(3, 7), static([2]), top, static([-1])]),
        c("Slice", "reverse", [feed(3, 7), static([-1]), bottom, static([1]), static([-1])]),
        c("Slice", "reverse_step2", [feed(3, 9), static([7]), static([0]), static([1]),
                                     static([-2])]),
        c("Slice", "yolo_focus", [feed(1, 3, 8, 8), static([1]), top, static([2]), static([2])]),
        c("Slice", "empty", [feed(4, 5), static([3]), static([1]), static([0])]),
        c("Gather", "axis0_vector", [feed(5, 4), static([0, 3, 3, 1])]),
        c("Gather", "axis1_scalar", [feed(2, 6, 3), static(2)], axis=1),
        c("Gather", "negative_index", [feed(2, 6, 3), static([-1, 0])], axis=1),
        c("Gather", "matrix_indices", [feed(7, 3), static([[0, 6], [2, 2]])]),
        c("Gather", "last_axis_scalar", [feed(2, 3, 5), static(-2)], axis=-1),
        c("Gather", "dynamic_indices", [feed(6, 4), ints(3, low=0, high=5)]),
    ]  # fmt: skip


def _reshaping() -> list[OpCase]:
    c = make_case
    return [
        c("Concat", "axis1", [feed(1, 3, 4, 4), feed(1, 5, 4, 4)], axis=1),
        c("Concat", "last_three", [feed(2, 3), feed(2, 1), feed(2, 4)], axis=-1),
        c("Concat", "axis0_const", [feed(2, 6), weight(1, 6)], axis=0),
        c("Reshape", "zero_and_minus1", [feed(2, 3, 4, 5), static([0, -1])]),
        c("Reshape", "split_heads", [feed(1, 10, 32), static([1, 10, 4, 8])]),
        c("Reshape", "flat", [feed(2, 3, 4), static([-1])]),
        c("Reshape", "keep_two", [feed(2, 3, 4, 5), static([0, 0, -1])]),
        c("Transpose", "default_perm", [feed(2, 3, 4)]),
        c("Transpose", "to_nhwc", [feed(1, 3, 4, 5)], perm=[0, 2, 3, 1]),
        c("Transpose", "heads", [feed(1, 10, 4, 8)], perm=[0, 2, 1, 3]),
        c("Flatten", "default", [feed(2, 3, 4, 5)]),
        c("Flatten", "axis0", [feed(2, 3, 4)], axis=0),
        c("Flatten", "axis2", [feed(2, 3, 4, 5)], axis=2),
        c("Flatten", "axis_neg1", [feed(2, 3, 4)], axis=-1),
        c("Squeeze", "axis1", [feed(2, 1, 4), static([1])]),
        c("Squeeze", "two_axes", [feed(1, 3, 1, 1), static([0, -1])]),
        c("Squeeze", "all", [feed(1, 3, 1, 4)]),
        c("Unsqueeze", "axis0", [feed(3, 4), static([0])]),
        c("Unsqueeze", "two_axes", [feed(3, 4), static([1, 3])]),
        c("Unsqueeze", "negative", [feed(3, 4), static([-1])]),
        c("Expand", "broadcast_rank_up", [feed(3, 1), static([2, 3, 4])]),
        c("Expand", "same_rank", [feed(1, 4), static([3, 4])]),
        c("Expand", "bidirectional", [feed(3, 1, 5), static([4, 1, 1, 1])]),
        c("Tile", "3d", [feed(2, 3, 4), static([2, 1, 3])]),
        c("Tile", "4d", [feed(1, 2, 3, 3), static([1, 2, 1, 2])]),
        c("Pad", "spatial", [feed(1, 2, 4, 4), static([0, 0, 1, 1, 0, 0, 1, 1])]),
        c("Pad", "value", [feed(1, 2, 4, 4), static([0, 0, 2, 0, 0, 0, 0, 3]), scalar(0.5)]),
        # The reference evaluator rejects negative pads.
        c("Pad", "crop", [feed(2, 6, 5), static([0, -1, 1, 0, -2, 1])], reference="onnxruntime"),
        c("Pad", "all_dims", [feed(2, 3), static([1, 2, 0, 1])]),
    ]


def _constants() -> list[OpCase]:
    c = make_case
    # Shape and Constant are folded by the interpreter; their values reach the library
    # through the adapter's constants.
    return [
        c("Shape", "full", [feed(2, 3, 4)]),
        c("Shape", "start_end", [feed(2, 3, 4, 5)], start=1, end=-1),
        c("Constant", "float_tensor", [], value=np.arange(6, dtype=np.float32).reshape(2, 3) / 7),
        c("Constant", "int_tensor", [], value=np.array([4, -1], np.int64)),
        c("ConstantOfShape", "float", [static([2, 3])], value=np.array([1.5], np.float32)),
        c("ConstantOfShape", "default_zero", [static([4])]),
        c("ConstantOfShape", "int64", [static([3, 2])], value=np.array([7], np.int64)),
        c("Range", "float", [scalar(0.0), scalar(5.0), scalar(0.5)]),
        c("Range", "float_negative_delta", [scalar(10.0), scalar(2.0), scalar(-1.5)]),
        c("Range", "int64", [static(2), static(11), static(3)]),
    ]


@cache
def catalogue() -> tuple[OpCase, ...]:
    """Return every conformance case, grouped by op family."""
    from conformance.catalog_decoders import FAMILIES
    from conformance.catalog_resize import resize_cases

    families = (
        _elementwise, _activations, _selection, _convolutions, _pools, _normalisations,
        _linear, _reductions, _slicing, _reshaping, _constants, resize_cases, *FAMILIES,
    )  # fmt: skip
    return tuple(case for family in families for case in family())
