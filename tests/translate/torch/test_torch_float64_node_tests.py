"""ONNX's node tests that torch passes, run in float64 against the float64 ONNX evaluator.

The torch translation in float64 is the reference of user ONNX files, so beyond passing
each node test at its float32 tolerance (tests/translate/test_backend_suite.py) it must
agree with :class:`onnx.reference.ReferenceEvaluator` run on the same graph made float64
(:func:`anpred.translate.double_graph.to_double`) to float64 rounding. Measured over all
1108 node tests torch passes: largest deviation (max-abs relative) 5.2e-16 (Attention with
a past cache and a 3-D mask); FP64_TOLERANCE leaves a margin of about 200x.

Where the evaluator itself rounds to float32 the deviation is the evaluator's, so those
tests get a float32-sized bound (:data:`EVALUATOR_FLOAT32`, each with its cause).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from conformance.backend_tests import BackendTest, load_tests, static_model
from onnx.reference import ReferenceEvaluator

from anpred.translate.double_graph import to_double
from anpred.translate.graph import GraphProgram
from anpred.translate.torch import make_adapter

EXPECTATIONS = Path(__file__).parents[1] / "expectations" / "torch.json"
FP64_TOLERANCE = 1e-13
#: 8 float32 epsilons: the evaluator's float32 steps measured up to 8.7e-7
#: (test_resize_downsample_scales_cubic_antialias).
FLOAT32_TOLERANCE = 8 * float(np.finfo(np.float32).eps)
#: Test-name prefixes where the evaluator computes in float32 whatever its input type.
EVALUATOR_FLOAT32 = {
    "test_erf": "Erf: np.vectorize(math.erf, otypes='f')",
    "test_gelu": "Gelu's function body: the float32 Erf, float32 constants 0.044715, 2/pi",
    "test_hardswish": "HardSwish's function body holds alpha = float32(1/6)",
    "test_gridsample": "GridSample's evaluator holds sample coordinates in float32",
    "test_group_normalization": "GroupNormalization-21 computes in float32 (stash_type=1)",
    "test_resize_": "Resize cubic: the float32 cubic_coeff_a (measured 5.2e-7)",
    "test_attention_": "Attention's evaluator takes sqrt(scale) of the float32 attribute",
    "test_lrn": "LRN's evaluator computes alpha / size in float32",
    "test_causal_conv_with_state_s": "CausalConvWithState's evaluator: SiLU in float32",
    "test_linear_attention_": "LinearAttention's evaluator computes in float32",
    "test_basic_deform_conv": "DeformConv: 9.3e-10 (2^-30) apart, not yet explained",
    "test_deform_conv": "DeformConv: up to 1.1e-9 apart, not yet explained",
}
#: Tests the evaluator cannot run on a float64 graph.
EVALUATOR_CANNOT = {
    "test_mvn": "the schema's function body adds a float32 epsilon to the float64 graph",
    "test_scatter_with_axis": "no evaluator for the deprecated Scatter",
    "test_scatter_without_axis": "no evaluator for the deprecated Scatter",
    "test_scan_sum": "the evaluator's Scan-8 fails on its optional sequence_lens",
    "test_bitcast_2d_float32_to_int32": "BitCast reinterprets float32 bits: no float64 graph",
    "test_bitcast_float32_to_int32": "BitCast reinterprets float32 bits: no float64 graph",
    "test_bitcast_int32_to_float32": "BitCast reinterprets float32 bits: no float64 graph",
    "test_bitcast_scalar_float32_to_int32": "BitCast reinterprets float32 bits: no float64 graph",
}
#: Tests whose evaluator output is float32 whatever the input (compared as float64);
#: TfIdfVectorizer's evaluator always returns float32 counts.
EVALUATOR_FLOAT32_OUTPUT = ("test_affine_grid", "test_tfidfvectorizer")
#: One node test per op family the float64 reference covers (the fast selection).
FAST = (
    "test_reciprocal", "test_sin", "test_acosh", "test_round", "test_sign", "test_isinf",
    "test_elu", "test_selu", "test_celu", "test_gelu_tanh_1", "test_softplus",
    "test_softsign", "test_mish", "test_thresholdedrelu", "test_shrink_hard", "test_prelu_example",
    "test_logsoftmax_axis_1", "test_hardmax_example",
    "test_reduce_log_sum_exp_empty_set",
    "test_reduce_l2_keep_dims_random", "test_reduce_prod_default_axes_keepdims_random",
    "test_argmax_keepdims_random_select_last_index", "test_instancenorm_example",
    "test_rms_normalization_4d_axis2", "test_l1normalization_axis_0",
    "test_top_k_smallest", "test_gathernd_example_float32",
    "test_scatternd_multiply", "test_scatter_elements_with_reduction_max",
    "test_depthtospace_example", "test_spacetodepth_example", "test_globalmaxpool",
    "test_lppool_2d_pads",
    "test_attention_4d_gqa_with_past_and_present", "test_attention_3d_causal",
    "test_rotary_embedding_3d_input", "test_rotary_embedding_interleaved",
    "test_if", "test_loop11", "test_scan9_multi_state", "test_nllloss_NCd1d2",
    "test_sce_NCd1d2d3_none_no_weight_negative_ii_log_prob", "test_unique_sorted_with_axis",
    "test_maxunpool_export_without_output_shape", "test_nonmaxsuppression_flipped_coordinates",
    "test_roialign_aligned_true", "test_simple_rnn_bidirectional", "test_swiglu_alpha",
    "test_tensorscatter_circular", "test_causal_conv_with_state_basic",
    "test_linear_attention_gated_delta_gqa", "test_qlinearmatmul_3D_int8_float32",
    "test_col2im_5d",
    "test_col2im_pads",
)  # fmt: skip


def _passing() -> list[BackendTest]:
    expected = json.loads(EXPECTATIONS.read_text())["tests"]
    return [t for t in load_tests() if expected[t.name]["outcome"] == "pass"]


def _deviation(out: np.ndarray, ref: np.ndarray) -> float:
    """Max-abs deviation relative to the reference's largest magnitude (finite values)."""
    finite = np.isfinite(ref)
    assert np.array_equal(finite, np.isfinite(out))
    assert np.array_equal(out[~finite], ref[~finite], equal_nan=True)
    if not finite.any():
        return 0.0
    scale = max(float(np.max(np.abs(ref[finite]))), np.finfo(np.float64).tiny)
    return float(np.max(np.abs(out[finite] - ref[finite]))) / scale


def _check(test: BackendTest) -> None:
    model, feeds = static_model(test)
    model = to_double(model)
    feeds = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the evaluator's own RuntimeWarnings (inf, nan)
        expected = ReferenceEvaluator(model).run(None, feeds)
    adapter = make_adapter({"dtype": "float64"})
    program = GraphProgram(model, adapter)
    values = program.run(feeds)
    actual = [adapter.to_numpy(values[name]) for name in program.outputs]
    limit = FP64_TOLERANCE
    if any(test.name.startswith(prefix) for prefix in EVALUATOR_FLOAT32):
        limit = FLOAT32_TOLERANCE
    for out, ref in zip(actual, expected, strict=True):
        ref = np.asarray(ref)
        if test.name.startswith(EVALUATOR_FLOAT32_OUTPUT):
            ref, limit = ref.astype(np.float64), FLOAT32_TOLERANCE
        assert out.shape == ref.shape
        assert out.dtype == ref.dtype, (out.dtype, ref.dtype)
        if ref.dtype.kind == "f":
            assert _deviation(out, ref) <= limit, test.name
        else:
            assert np.array_equal(out, ref), test.name


@pytest.mark.parametrize("name", FAST)
def test_float64_translation_matches_the_float64_evaluator(name: str) -> None:
    (test,) = [t for t in _passing() if t.name == name]
    _check(test)


@pytest.mark.slow
def test_every_passing_node_test_matches_in_float64() -> None:
    failures = []
    for test in _passing():
        if test.name in EVALUATOR_CANNOT:
            continue
        try:
            _check(test)
        except AssertionError as exc:
            failures.append(f"{test.name}: {exc}".splitlines()[0])
    assert failures == []


#: Ops whose node tests are float64 or integer only (not runnable in the backend suite):
#: (op, attributes, input shapes).
_ONE_NODE = {
    "cumsum_exclusive_reverse": ("CumSum", {"exclusive": 1, "reverse": 1}, [(3, 5)]),
    "cumsum": ("CumSum", {}, [(4, 6)]),
    "einsum_batch_matmul": ("Einsum", {"equation": "bij,bjk->bik"}, [(2, 3, 4), (2, 4, 5)]),
    "einsum_trace_sum": ("Einsum", {"equation": "ii->"}, [(5, 5)]),
    "trilu_lower": ("Trilu", {"upper": 0}, [(4, 5)]),
    "reduce_log_sum_exp": ("ReduceLogSumExp", {"keepdims": 0}, [(3, 4, 5)]),
}


@pytest.mark.parametrize("key", sorted(_ONE_NODE))
def test_float64_one_node_models_match_the_evaluator(key: str) -> None:
    from onnx import TensorProto, helper

    op, attrs, shapes = _ONE_NODE[key]
    rng = np.random.default_rng(0)
    feeds = {f"x{i}": rng.standard_normal(shape) for i, shape in enumerate(shapes)}
    inputs = list(feeds)
    initializers = []
    if op == "CumSum":
        inputs.append("axis")
        initializers.append(helper.make_tensor("axis", TensorProto.INT64, [], [1]))
    node = helper.make_node(op, inputs, ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        key,
        [helper.make_tensor_value_info(n, TensorProto.DOUBLE, v.shape) for n, v in feeds.items()],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    (expected,) = ReferenceEvaluator(model).run(None, feeds)
    adapter = make_adapter({"dtype": "float64"})
    program = GraphProgram(model, adapter)
    actual = adapter.to_numpy(program.run(feeds)["y"])
    assert actual.shape == expected.shape and actual.dtype == np.float64
    assert _deviation(actual, np.asarray(expected)) <= FP64_TOLERANCE


def test_double_graph_turns_every_float_into_double() -> None:
    from onnx import TensorProto, helper, numpy_helper

    node = helper.make_node("Cast", ["x"], ["c"], to=TensorProto.FLOAT)
    constant = helper.make_node("Constant", [], ["k"], value_float=0.5)
    add = helper.make_node("Add", ["c", "k"], ["y"])
    graph = helper.make_graph(
        [node, constant, add],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.ones(2, np.float32), "w")],
    )
    doubled = to_double(helper.make_model(graph))
    assert doubled.graph.input[0].type.tensor_type.elem_type == TensorProto.DOUBLE
    assert doubled.graph.output[0].type.tensor_type.elem_type == TensorProto.DOUBLE
    assert doubled.graph.initializer[0].data_type == TensorProto.DOUBLE
    assert doubled.graph.node[0].attribute[0].i == TensorProto.DOUBLE
    (value,) = doubled.graph.node[1].attribute
    assert value.name == "value" and value.t.data_type == TensorProto.DOUBLE
    (y,) = ReferenceEvaluator(doubled).run(None, {"x": np.array([1.0, 2.0])})
    assert y.dtype == np.float64 and y.tolist() == [1.5, 2.5]
    assert graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16  # untouched
