import json

import numpy as np
import pytest

from anpred.errors import UsageError
from anpred.localization import (
    border_mask,
    dimension_profile,
    elementwise_error,
    top_channel_share,
)


def _background(shape, seed=0):
    # fp32-rounding-sized noise everywhere, so "clean" parts are not exactly zero
    return 1e-8 * np.random.default_rng(seed).random(shape)


def test_error_in_two_of_64_channels_is_carried_by_the_top_5_percent():
    error = _background((2, 64, 16, 16))
    error[:, [5, 40]] += 1e-3
    profile = dimension_profile(error)
    assert len(profile.top_channels) == 4  # ceil(0.05 * 64)
    assert set(profile.top_channels[:2]) == {5, 40}
    assert profile.top_channel_share > 0.999  # 62 background channels carry 1.5e-4
    assert profile.per_channel.shape == (64,)
    json.dumps(profile.to_dict(), allow_nan=False)


def test_uniform_error_gives_the_proportional_share():
    profile = dimension_profile(np.full((1, 64, 4, 4), 2e-7))
    assert profile.top_channel_share == pytest.approx(4 / 64)
    wider = dimension_profile(np.full((1, 64, 4, 4), 2e-7), top_channel_fraction=0.25)
    assert wider.top_channel_share == pytest.approx(0.25)


def test_border_errors_give_a_large_border_interior_ratio():
    error = _background((2, 8, 12, 12), seed=1)
    error[:, :, 0, :] += 1e-5
    error[:, :, -1, :] += 1e-5
    error[:, :, :, 0] += 1e-5
    error[:, :, :, -1] += 1e-5
    profile = dimension_profile(error)
    assert profile.spatial_map.shape == (12, 12)
    assert profile.border_interior_ratio > 100
    # a border of width 3 dilutes the edge with clean positions
    wide = dimension_profile(error, border_width=3)
    assert 1 < wide.border_interior_ratio < profile.border_interior_ratio
    assert set(profile.arrays()) == {"per_channel", "spatial_map"}


def test_interior_error_gives_a_small_ratio():
    error = _background((1, 4, 10, 10), seed=2)
    error[:, :, 3:7, 3:7] += 1e-5
    assert dimension_profile(error).border_interior_ratio < 0.01


def test_one_dimensional_token_and_flat_layouts():
    ncl = _background((2, 16, 20), seed=3)
    ncl[:, :, :1] += 1e-5
    assert dimension_profile(ncl).border_interior_ratio > 10
    tokens = _background((2, 20, 32), seed=4)  # N, L, D with channels last
    tokens[:, :, 7] += 1e-4
    profile = dimension_profile(tokens, channel_axis=-1)
    assert profile.channel_axis == 2 and profile.top_channels[0] == 7
    assert profile.spatial_map.shape == (20,)
    flat = dimension_profile(_background((3, 10), seed=5))
    assert flat.spatial_map is None and flat.border_interior_ratio is None
    json.dumps(flat.to_dict(), allow_nan=False)


def test_degenerate_cases():
    tiny = dimension_profile(np.ones((1, 2, 2, 2)))
    assert tiny.interior_mean is None and tiny.border_interior_ratio is None
    zero_inside = np.zeros((1, 1, 5, 5))
    zero_inside[..., 0, 0] = 1.0
    assert dimension_profile(zero_inside).border_interior_ratio == np.inf
    assert dimension_profile(zero_inside).to_dict()["border_interior_ratio"] is None
    assert dimension_profile(np.zeros((1, 3, 4))).top_channel_share is None
    assert top_channel_share(np.array([1.0, 3.0]), 0.5) == ((1,), 0.75)


def test_border_mask_width():
    mask = border_mask((5, 6), 2)
    assert mask.sum() == 30 - 1 * 2  # interior is rows 2..2, columns 2..3
    with pytest.raises(UsageError):
        border_mask((5, 5), 0)


def test_bad_inputs_are_rejected():
    with pytest.raises(UsageError):
        dimension_profile(np.ones(5))
    with pytest.raises(UsageError, match="batch"):
        dimension_profile(np.ones((2, 3)), channel_axis=0)
    with pytest.raises(UsageError):
        dimension_profile(np.full((1, 2, 3), np.nan))
    with pytest.raises(UsageError):
        dimension_profile(np.ones((1, 2, 3)), top_channel_fraction=0.0)


def test_elementwise_error():
    x = np.array([1.0, 2.0], dtype=np.float32)
    np.testing.assert_array_equal(elementwise_error(x, np.array([1.5, 1.0])), [0.5, 1.0])
    with pytest.raises(UsageError):
        elementwise_error(x, np.zeros(3))


def _loops():
    from anpred.analysis import onepass

    loops = onepass.kernels()
    if loops is None:
        pytest.skip("numba is not installed")
    return loops


@pytest.mark.parametrize(
    ("shape", "axis"),
    [
        ((1, 16, 20, 24), 1),  # NCHW
        ((2, 7, 9, 5), 1),  # a batch, odd sides
        ((1, 84, 300), 1),  # NCL (a detection head)
        ((2, 12, 48), -1),  # tokens: N, L, D
        ((3, 10), 1),  # no spatial axes
        ((1, 4, 3, 5, 6), 1),  # NCDHW
    ],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_compiled_profile_is_numpys(shape, axis, dtype):
    """difference_profile (one compiled pass over x and ref) against dimension_profile of
    the error tensor: its sums are added in another order, so the means agree to rounding
    (measured ≤ 2e-15 relative here; 1e-12 allowed, the one-pass kernel's bound), the
    top channels and the ``None``/value pattern exactly."""
    from anpred.localization.dimension import difference_profile

    rng = np.random.default_rng(11)
    ref = rng.standard_normal(shape)
    x = (ref * (1 + 1e-6 * rng.standard_normal(shape))).astype(dtype)
    x.reshape(-1)[: x.size // 7] += 1e-3  # a region with more error
    got = difference_profile(x, ref, _loops(), channel_axis=axis).to_dict()
    expected = dimension_profile(elementwise_error(x, ref), channel_axis=axis).to_dict()
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, float):
            assert got[key] == pytest.approx(value, rel=1e-12, abs=0), key
        elif key == "per_channel":
            np.testing.assert_allclose(got[key], value, rtol=1e-12, atol=0)
        else:
            assert got[key] == value, key


def test_the_compiled_profile_refuses_what_numpy_refuses():
    from anpred.localization.dimension import difference_profile

    loops = _loops()
    ref = np.ones((1, 3, 4, 4))
    for bad in (np.nan, np.inf):
        x = ref.copy()
        x[0, 1, 2, 2] = bad
        with pytest.raises(UsageError, match="finite"):
            difference_profile(x, ref, loops)
    with pytest.raises(UsageError, match="shapes differ"):
        difference_profile(ref, np.ones((1, 3, 4, 5)), loops)
    with pytest.raises(UsageError, match="batch and a channel"):
        difference_profile(np.ones(5), np.ones(5), loops)
    # a channel axis the loops do not cover (the middle of four) takes NumPy's path
    x = ref + np.arange(16.0).reshape(1, 1, 4, 4) * 1e-7
    got = difference_profile(x, ref, loops, channel_axis=2).to_dict()
    assert got == dimension_profile(elementwise_error(x, ref), channel_axis=2).to_dict()
