"""jax translators of the op families added for issue 43, on ONNX's own node tests.

One representative ONNX backend node test per translator (and per notable attribute),
run through the jax adapter exactly as ``conformance.backend_suite`` runs it (static
inputs, ONNX's tolerances); the full suite's outcomes are in
``tests/translate/expectations/jax.json``.

This file imports one DL library: jax.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
pytest.importorskip("jax")

from conformance.backend_suite import Runner  # noqa: E402
from conformance.backend_tests import load_tests  # noqa: E402

CASES = [
    "test_gridsample_bicubic",  # ops_grid
    "test_gridsample_reflection_padding",
    "test_gridsample_volumetric_bilinear_align_corners_1",
    "test_affine_grid_3d_align_corners",
    "test_affine_grid_2d_expanded",  # ops_control If + shape arithmetic while tracing
    "test_scatter_elements_with_reduction_max",  # ops_scatter
    "test_scatternd_multiply",
    "test_tensorscatter_circular",
    "test_compress_negative_axis",
    "test_reversesequence_batch",
    "test_eyelike_populate_off_main_diagonal",
    "test_bitcast_float32_to_int32",
    "test_sce_NCd1d2d3_none_no_weight_negative_ii",  # ops_loss
    "test_nllloss_NCd1d2_with_weight",
    "test_spacetodepth_crd_mode_example",  # ops_spatial
    "test_depthtospace_example",
    "test_center_crop_pad_crop_and_pad",
    "test_col2im_pads",
    "test_lppool_2d_same_upper",  # ops_unpool
    "test_maxunpool_export_without_output_shape",
    "test_simple_rnn_bidirectional",  # ops_recurrent
    "test_mvn",  # ops_norm
    "test_det_nd",  # ops_math
    "test_scan9_sum",  # ops_control
    "test_linear_attention_gated_delta_gqa",  # ops_recurrent_state
    "test_linear_attention_gated_expanded",  # Scan around the expanded body
    "test_causal_conv_with_state_with_bias_and_past_state",
    "test_qlinearmatmul_3D_int8_float32",  # ops_matmul
    "test_basic_deform_conv_with_padding",  # ops_deform
    "test_deform_conv_with_mask_bias",
    "test_attention_3d_gqa_with_past_and_present_expanded",  # shape arithmetic
    "test_rotary_embedding_interleaved_expanded",
    "test_reduce_max_empty_set",  # ops_reduce
]


@pytest.fixture(scope="module")
def runner() -> Runner:
    return Runner("jax", "static")


@pytest.fixture(scope="module")
def tests() -> dict:
    wanted = set(CASES)
    return {t.name: t for t in load_tests() if t.name in wanted}


@pytest.mark.parametrize("name", CASES)
def test_node_test_passes(name: str, runner: Runner, tests: dict) -> None:
    outcome, message = runner.run(tests[name])
    assert outcome == "pass", message


#: Data-dependent output sizes: they need jax's eager mode (``jit`` off).
EAGER_CASES = [
    "test_nonmaxsuppression_suppress_by_IOU_and_scores",
    "test_unique_not_sorted_without_axis",
]


@pytest.mark.parametrize("name", EAGER_CASES)
def test_data_dependent_ops_pass_eagerly_and_refuse_under_jit(name: str, runner: Runner) -> None:
    from anpred.translate.jax import make_adapter

    (test,) = [t for t in load_tests() if t.name == name]
    outcome, message = runner.run(test)
    assert outcome == "error" and "jax.jit cannot compile" in message
    eager = Runner("jax", "static")
    eager.adapter = make_adapter({"jit": False})
    outcome, message = eager.run(test)
    assert outcome == "pass", message
