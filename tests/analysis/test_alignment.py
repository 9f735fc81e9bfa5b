import numpy as np
import pytest

from anpred.analysis import AlignmentError, align, infer_channel_permutation
from anpred.analysis.alignment import _regroupable


def _reference(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Float32-representable reference values, so an exact round trip is bitwise."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32).astype(np.float64)


def test_float32_capture_is_cast_and_the_cast_recorded():
    ref = _reference((1, 3, 4, 5))
    aligned = align(ref.astype(np.float32), ref.shape, "NCHW")
    assert aligned.values.dtype == np.float64
    assert aligned.values.flags.c_contiguous
    assert np.array_equal(aligned.values, ref)
    assert aligned.steps == ("cast float32->float64",)


def test_keep_float32_keeps_a_float32_capture_and_only_that():
    ref = _reference((1, 3, 4, 5))
    nhwc = ref.transpose(0, 2, 3, 1).astype(np.float32)
    kept = align(nhwc, ref.shape, "NHWC", keep_float32=True)
    assert kept.values.dtype == np.float32 and kept.values.flags.c_contiguous
    assert np.array_equal(kept.values, ref)
    assert kept.steps == align(nhwc, ref.shape, "NHWC").steps  # the cast is still named
    half = align(ref.astype(np.float16), ref.shape, keep_float32=True)
    assert half.values.dtype == np.float64  # other dtypes are cast as before


def test_float64_capture_in_reference_form_needs_no_step():
    ref = _reference((2, 3))
    assert align(ref, ref.shape).steps == ()


def test_nhwc_capture_aligns_exactly_to_nchw():
    ref = _reference((2, 16, 8, 6))
    capture = ref.transpose(0, 2, 3, 1).astype(np.float32)
    aligned = align(capture, ref.shape, "NHWC")
    assert np.array_equal(aligned.values, ref)
    assert aligned.steps == ("cast float32->float64", "transpose NHWC->NCHW")


def test_nwc_and_ndhwc_layouts_map_to_channels_first():
    ref1 = _reference((1, 5, 7))
    assert np.array_equal(align(ref1.transpose(0, 2, 1), ref1.shape, "NWC").values, ref1)
    ref3 = _reference((1, 4, 3, 5, 6))
    capture = ref3.transpose(0, 2, 3, 4, 1)
    assert np.array_equal(align(capture, ref3.shape, "NDHWC").values, ref3)


def test_square_nhwc_without_layout_is_resolved_by_values():
    # (1, 8, 8, 16) fits (1, 16, 8, 8) as NHWC->NCHW and as NWHC->NCHW: shape is ambiguous
    ref = _reference((1, 16, 8, 8))
    capture = ref.transpose(0, 2, 3, 1) + 1e-7 * _reference((1, 8, 8, 16), seed=1)
    aligned = align(capture, ref.shape, None, reference=ref)
    assert np.allclose(aligned.values, ref, rtol=0, atol=1e-6)
    assert "inferred from values" in aligned.steps[0]


def test_square_nhwc_without_layout_or_reference_is_refused():
    ref = _reference((1, 16, 8, 8))
    with pytest.raises(AlignmentError, match="record the layout or pass the reference"):
        align(ref.transpose(0, 2, 3, 1), ref.shape, None)


def test_indistinguishable_axis_orders_are_refused_unless_values_are_identical():
    # a feature map symmetric in H and W cannot tell NCHW from NCWH
    half = _reference((1, 4, 6, 6))
    ref = half + half.transpose(0, 1, 3, 2)
    exact = align(ref.transpose(0, 2, 3, 1), ref.shape, None, reference=ref)
    assert np.array_equal(exact.values, ref)  # both orders give the same values: harmless
    noisy = ref.transpose(0, 2, 3, 1) * (1 + 1e-7 * _reference((1, 6, 6, 4), seed=2))
    with pytest.raises(AlignmentError, match="about equally close"):
        align(noisy, ref.shape, None, reference=ref)


def test_a_zero_reference_cannot_choose_an_axis_order():
    # relative L2 against a zero reference is inf for every order (metrics.relative_l2)
    zero = np.zeros((1, 16, 8, 8))
    capture = _reference((1, 8, 8, 16))
    with pytest.raises(AlignmentError, match="the reference is zero"):
        align(capture, zero.shape, None, reference=zero)
    # a zero capture is 0 away in every order, all orders give the same values: taken
    assert not align(np.zeros((1, 8, 8, 16)), zero.shape, None, reference=zero).values.any()


def test_unique_axis_order_is_inferred_from_shape():
    ref = _reference((1, 84, 210))
    aligned = align(ref.transpose(0, 2, 1), ref.shape, None)
    assert np.array_equal(aligned.values, ref)
    assert aligned.steps == ("transpose axes (0, 2, 1) inferred from shape",)


def test_batch_axis_is_squeezed_or_added():
    ref = _reference((16, 5))
    squeezed = align(ref[None], ref.shape)
    assert np.array_equal(squeezed.values, ref) and squeezed.steps == ("squeeze batch",)
    added = align(ref, (1, 16, 5))
    assert np.array_equal(added.values, ref[None]) and added.steps == ("add batch axis",)


def test_nhwc_flattened_reference_uses_channels_first_flatten_order():
    # torch flattens NCHW; the capture is the NHWC feature map before its flatten
    feature = _reference((1, 64, 4, 4))
    ref = feature.reshape(1, -1)
    aligned = align(feature.transpose(0, 2, 3, 1), ref.shape, "NHWC")
    assert np.array_equal(aligned.values, ref)
    assert aligned.steps[-1] == "flatten order: reshape (1, 64, 4, 4)->(1, 1024) in C order"


def test_reinterpreting_reshape_is_refused():
    ref = _reference((1, 3, 8))
    with pytest.raises(AlignmentError, match="cannot be mapped"):
        align(_reference((1, 6, 4)), ref.shape, None)
    with pytest.raises(AlignmentError, match="without reinterpreting"):
        align(_reference((1, 6, 4)), ref.shape, "NCW")


def test_layout_that_does_not_fit_the_capture_is_refused():
    with pytest.raises(AlignmentError, match="does not fit"):
        align(_reference((1, 1024)), (1, 1024), "NHWC")
    with pytest.raises(AlignmentError, match="do not name the same axes"):
        align(_reference((1, 2, 3, 4)), (1, 2, 3, 4), "NHWC", reference_layout="NCDW")


def test_reference_values_of_another_shape_are_refused():
    with pytest.raises(AlignmentError, match="do not have the reference shape"):
        align(_reference((2, 3)), (2, 3), reference=_reference((3, 2)))


def test_non_numeric_dtypes_are_refused_and_bfloat16_is_cast():
    with pytest.raises(AlignmentError, match="complex"):
        align(np.zeros(3, dtype=np.complex64), (3,))
    with pytest.raises(AlignmentError, match="dtype"):
        align(np.array(["a", "b"]), (2,))
    ml_dtypes = pytest.importorskip("ml_dtypes")
    aligned = align(np.array([1.0, 2.5], dtype=ml_dtypes.bfloat16), (2,))
    assert np.array_equal(aligned.values, [1.0, 2.5])
    assert aligned.steps == ("cast bfloat16->float64",)


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        ((1, 64, 4, 4), (1, 1024), True),  # flatten
        ((1, 1024), (1, 64, 4, 4), True),  # unflatten
        ((2, 3, 4), (6, 4), True),
        ((2, 3, 4), (2, 12), True),
        ((6, 4), (2, 12), False),  # merges and splits across one group
        ((2, 3), (3, 2), False),
        ((5,), (6,), False),
        ((0, 3), (3, 0), False),
    ],
)
def test_regroupable(source, target, expected):
    assert _regroupable(source, target) is expected


def test_channel_permuted_capture_aligns_exactly():
    rng = np.random.default_rng(3)
    # channels with distinct distributions, as after a trained conv layer
    scales = rng.uniform(0.2, 3.0, size=(1, 32, 1, 1))
    shifts = rng.normal(size=(1, 32, 1, 1))
    ref = (rng.standard_normal((2, 32, 10, 10)) * scales + shifts).astype(np.float32)
    ref = ref.astype(np.float64)
    order = rng.permutation(32)
    capture = ref[:, order]
    permutation = infer_channel_permutation(capture, ref, axis=1)
    assert permutation.confidence == 1.0 and permutation.ambiguous == ()
    aligned = align(capture, ref.shape, "NCHW", channel_permutation=permutation)
    assert np.array_equal(aligned.values, ref)
    assert aligned.steps == ("permute channels (axis 1) matched by statistics, confidence 1.000",)


def test_independent_nhwc_implementation_with_other_channel_order_and_fp32_noise():
    rng = np.random.default_rng(4)
    scales = rng.uniform(0.5, 2.0, size=(1, 24, 1, 1))
    ref = rng.standard_normal((1, 24, 12, 12)) * scales + rng.normal(size=(1, 24, 1, 1))
    order = rng.permutation(24)
    noisy = ref[:, order] * (1 + 1e-6 * rng.standard_normal(ref.shape))
    capture = noisy.transpose(0, 2, 3, 1).astype(np.float32)  # Keras-style NHWC
    in_layout = align(capture, ref.shape, "NHWC")
    permutation = infer_channel_permutation(in_layout.values, ref)
    assert np.array_equal(ref[:, order][:, permutation.permutation], ref)
    aligned = align(capture, ref.shape, "NHWC", channel_permutation=permutation)
    assert aligned.steps[:2] == ("cast float32->float64", "transpose NHWC->NCHW")
    assert aligned.steps[2].startswith("permute channels (axis 1)")
    assert np.max(np.abs(aligned.values - ref) / np.abs(ref).max()) < 1e-5


def test_values_descriptor_matches_channels_of_same_distribution():
    # same-distribution channels are told apart only by their content
    rng = np.random.default_rng(5)
    ref = rng.standard_normal((1, 16, 8, 8))
    order = rng.permutation(16)
    permutation = infer_channel_permutation(ref[:, order], ref, descriptor="values")
    assert np.array_equal(ref[:, order][:, permutation.permutation], ref)
    assert permutation.confidence == 1.0


def test_interchangeable_channels_are_reported_ambiguous():
    rng = np.random.default_rng(6)
    ref = rng.standard_normal((1, 6, 5, 5)) * np.arange(1, 7).reshape(1, 6, 1, 1)
    ref[:, 2] = 0.0  # two dead channels: any order of them is right
    ref[:, 4] = 0.0
    permutation = infer_channel_permutation(ref, ref)
    assert set(permutation.ambiguous) == {2, 4}
    assert permutation.confidence == pytest.approx(4 / 6)
    assert np.array_equal(permutation.apply(ref), ref)


def test_channel_matching_needs_aligned_shapes():
    with pytest.raises(ValueError, match="align layout and shape"):
        infer_channel_permutation(np.zeros((1, 2, 3)), np.zeros((1, 3, 2)))
