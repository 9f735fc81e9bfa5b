"""The op families added to the TensorFlow translators beyond the vision subset, one ONNX
backend node test each, static and fed, in this process (fast; the whole suite is the slow
``test_backend_suite`` run against ``expectations/tensorflow*.json``).

Each test compares with ONNX's expected outputs as the backend runner does
(:func:`conformance.backend_suite.compare`: same shape and dtype, the test's tolerance).

This file imports one DL library: tensorflow.
"""

from __future__ import annotations

import functools

import pytest

pytest.importorskip("tensorflow")

from conformance.backend_suite import Runner  # noqa: E402
from conformance.backend_tests import BackendTest, load_tests  # noqa: E402

#: One or two node tests per family (op types in the name), each exercising the family's
#: hardest attribute (reduction mul, reflection padding, run-time trip count ...).
FAMILIES = [
    "test_scatter_elements_with_reduction_mul",
    "test_scatternd_multiply",
    "test_tensorscatter_circular",
    "test_compress_negative_axis",
    "test_reversesequence_batch",
    "test_spacetodepth_crd_mode_example",
    "test_lppool_2d_dilations",
    "test_sce_none_log_prob",
    "test_nllloss_NCd1d2d3_none_no_weight_negative_ii",
    "test_gridsample_reflection_padding",
    "test_gridsample_bicubic_align_corners_1_additional_1",
    "test_gridsample_volumetric_nearest_align_corners_0",
    "test_affine_grid_3d_align_corners",
    "test_nonmaxsuppression_center_point_box_format",
    "test_simple_rnn_bidirectional",
    "test_rnn_seq_length",
    "test_col2im_5d",
    "test_center_crop_pad_crop_and_pad",
    "test_causal_conv_with_state_with_bias_and_past_state",
    "test_linear_attention_gated_delta_gqa",
    "test_qlinearmatmul_3D_int8_float32",
    "test_quantizelinear_blocked_asymmetric",
    "test_bitcast_int32_to_float32",
    "test_batchnorm_example_training_mode",
    "test_if",
    "test_loop11",
    "test_scan9_multi_state",
    "test_unique_sorted_with_axis_3d",
    "test_maxunpool_export_without_output_shape",
    "test_deform_conv_with_multiple_offset_groups",
    "test_tfidfvectorizer_tf_batch_uniandbigrams_skip5",
    "test_reduce_sum_empty_axes_input_noop",
    "test_slice_neg_steps",
    "test_swiglu_alpha",
    "test_roialign_aligned_true",
    "test_roialign_aligned_false",
]


@functools.cache
def _tests() -> dict[str, BackendTest]:
    return {t.name: t for t in load_tests()}


@functools.cache
def _runner(mode: str) -> Runner:
    return Runner("tensorflow", mode)


@pytest.mark.parametrize("mode", ["static", "fed"])
@pytest.mark.parametrize("name", FAMILIES)
def test_family_passes_its_node_test(name: str, mode: str) -> None:
    outcome, message = _runner(mode).run(_tests()[name])
    assert (outcome, message) == ("pass", "")
