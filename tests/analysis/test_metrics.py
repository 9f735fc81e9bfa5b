import math

import numpy as np
import pytest
from scipy.stats import wasserstein_distance

from anpred.analysis import compute_metrics, get_metric, metric_names, register_metric
from anpred.analysis import metrics as metrics_module


def m(name: str, x, c) -> float:
    return get_metric(name)(np.asarray(x, dtype=np.float64), np.asarray(c, dtype=np.float64))


def test_registered_metrics_cover_every_dimension_the_design_asks_for():
    assert set(metric_names()) >= {
        "rel_l2",
        "max_abs",
        "max_ulp",
        "cosine",
        "wasserstein",
        "channel_moments",
    }
    assert get_metric("wasserstein").distributional
    assert get_metric("channel_moments").distributional
    assert not get_metric("rel_l2").distributional


def test_duplicate_and_unknown_metrics_are_errors(monkeypatch):
    monkeypatch.setattr(metrics_module, "_METRICS", dict(metrics_module._METRICS))
    with pytest.raises(ValueError, match="registered twice"):
        register_metric("rel_l2")(lambda x, c: 0.0)
    register_metric("always_one")(lambda x, c: 1.0)
    assert m("always_one", [1.0], [2.0]) == 1.0
    with pytest.raises(KeyError, match="no metric 'nope'"):
        get_metric("nope")


def test_relative_l2_formula_and_zero_guard():
    assert m("rel_l2", [3.0, 4.0], [0.0, 5.0]) == pytest.approx(math.sqrt(9 + 1) / 5)
    assert m("rel_l2", [0.0, 0.0], [0.0, 0.0]) == 0.0
    assert m("rel_l2", [1e-30, 0.0], [0.0, 0.0]) == math.inf
    assert math.isnan(m("rel_l2", [np.nan, 1.0], [1.0, 1.0]))


# below the smallest normal float32 (2**-126 ≈ 1.18e-38): float32-subnormal magnitudes
SUBNORMAL32 = 1e-39


@pytest.mark.parametrize(
    ("x", "c", "expected"),
    [
        ([0.0, 0.0], [0.0, 0.0], 0.0),  # zero reference, zero value
        ([0.0, 1e-3], [0.0, 0.0], math.inf),  # zero reference, nonzero value
        ([SUBNORMAL32, 0.0], [0.0, 0.0], 0.0),  # a subnormal difference counts as zero
        ([0.0, 0.0], [SUBNORMAL32, 0.0], 0.0),  # flushed to zero: no error
        ([1.0, 0.0], [SUBNORMAL32, 0.0], math.inf),  # was 1e39 as a plain ratio
        ([2.0**-125, 0.0], [2.0**-126, 0.0], 1.0),  # normal float32 norms: a plain ratio
        ([np.inf, 1.0], [1.0, 1.0], math.inf),
        ([np.inf, 0.0], [0.0, 0.0], math.inf),
        ([np.nan, 0.0], [0.0, 0.0], math.nan),
        ([1.0, 1.0], [np.inf, 1.0], math.nan),
        ([1.0, 1.0], [np.nan, 1.0], math.nan),
    ],
)
def test_relative_l2_rule_for_zero_subnormal_and_non_finite_references(x, c, expected):
    got = metrics_module.relative_l2(np.asarray(x), np.asarray(c, dtype=np.float64))
    assert got == expected or (math.isnan(expected) and math.isnan(got))
    registered = m("rel_l2", x, c)
    assert registered == got or (math.isnan(got) and math.isnan(registered))


def test_relative_l2_is_one_function_with_one_resolution():
    assert get_metric("rel_l2").resolution == metrics_module.RELATIVE_L2_RESOLUTION == 2.0**-24
    assert metrics_module.ZERO_NORM == float(np.finfo(np.float32).tiny)
    with pytest.raises(ValueError, match="shapes differ"):
        metrics_module.relative_l2(np.zeros(4), np.zeros((2, 2)))


def test_max_abs():
    assert m("max_abs", [1.0, -2.0, 3.0], [1.5, -2.0, 2.0]) == 1.0


def test_max_ulp_counts_float32_steps():
    one = np.float32(1.0)
    up = np.nextafter(one, np.float32(2.0))
    assert m("max_ulp", [up], [one]) == 1.0
    assert m("max_ulp", [np.nextafter(up, np.float32(2.0))], [one]) == 2.0
    assert m("max_ulp", [0.0], [-0.0]) == 0.0
    tiny = np.nextafter(np.float32(0.0), np.float32(1.0))
    assert m("max_ulp", [tiny], [-tiny]) == 2.0  # across zero: -tiny, ±0, +tiny
    # values equal after rounding to float32 are 0 ULP apart
    assert m("max_ulp", [1.0 + 1e-10], [1.0]) == 0.0
    big = np.finfo(np.float32).max
    assert m("max_ulp", [np.inf], [big]) == 1.0
    assert math.isnan(m("max_ulp", [np.nan], [1.0]))


def test_cosine_distance_is_scale_blind_and_accurate_for_nearly_parallel_vectors():
    rng = np.random.default_rng(0)
    c = rng.standard_normal(10_000)
    assert m("cosine", 3.5 * c, c) == pytest.approx(0.0, abs=1e-15)
    assert m("cosine", [1.0, 0.0], [0.0, 2.0]) == pytest.approx(1.0)
    assert m("cosine", [0.0, 0.0], [0.0, 0.0]) == 0.0
    assert m("cosine", [0.0, 0.0], [1.0, 0.0]) == 1.0
    # x = c + eps*d with d orthogonal to c: 1 - cos = 1 - 1/sqrt(1 + t^2), t = eps|d|/|c|
    d = rng.standard_normal(10_000)
    d -= (d @ c) / (c @ c) * c
    eps = 1e-7
    t = eps * np.linalg.norm(d) / np.linalg.norm(c)
    exact = t**2 / 2 - 3 * t**4 / 8  # series of 1 - (1 + t²)^(-1/2)
    got = m("cosine", c + eps * d, c)
    assert got == pytest.approx(exact, rel=1e-6)
    naive = 1 - np.dot(c + eps * d, c) / (np.linalg.norm(c + eps * d) * np.linalg.norm(c))
    assert abs(naive - exact) / exact > 1e-3  # what the stable formula avoids


def test_wasserstein_is_permutation_blind_and_matches_scipy():
    rng = np.random.default_rng(1)
    c = rng.standard_normal(5_000)
    assert m("wasserstein", rng.permutation(c), c) == 0.0
    x = c * 1.01 + 0.02
    iqr = np.quantile(c, 0.75) - np.quantile(c, 0.25)
    assert m("wasserstein", x, c) == pytest.approx(wasserstein_distance(x, c) / iqr, rel=1e-12)
    shifted = c + 0.1
    assert m("wasserstein", shifted, c) == pytest.approx(0.1 / iqr, rel=1e-12)


def test_wasserstein_falls_back_to_std_when_the_iqr_is_zero():
    c = np.zeros(100)
    c[:10] = np.linspace(1, 2, 10)  # 90 % zeros: IQR 0
    x = c + 0.01
    assert m("wasserstein", x, c) == pytest.approx(0.01 / np.std(c), rel=1e-12)
    assert m("wasserstein", np.ones(4), np.zeros(4)) == math.inf


def test_channel_moments_sees_one_rescaled_channel():
    rng = np.random.default_rng(2)
    c = rng.standard_normal((2, 8, 5, 5))
    x = c.copy()
    x[:, 3] *= 1.05
    per_channel = np.swapaxes(c, 0, 1).reshape(8, -1)
    delta_std = 0.05 * per_channel[3].std()
    delta_mean = abs(0.05 * per_channel[3].mean())
    rms = np.sqrt(np.mean(c**2))
    expected = max(delta_std, delta_mean) / rms
    assert m("channel_moments", x, c) == pytest.approx(expected, rel=1e-9)
    # equally-sized errors spread over all channels give a smaller value than one channel
    assert m("channel_moments", c * 1.05 ** (1 / 8), c) < m("channel_moments", x, c)


def test_channel_moments_of_a_vector_is_one_channel():
    assert m("channel_moments", [1.0, 3.0], [1.0, 1.0]) == pytest.approx(1.0)


def test_compute_metrics_returns_every_metric_and_checks_shapes():
    x = np.ones((1, 2, 3))
    values = compute_metrics(x, x)
    assert set(values) == set(metric_names())
    assert all(v == 0.0 for v in values.values())
    with pytest.raises(ValueError, match="shapes differ"):
        compute_metrics(np.ones(3), np.ones(4))


def test_empty_arrays_have_no_deviation():
    empty = np.zeros((1, 0, 4))
    assert all(v == 0.0 for v in compute_metrics(empty, empty).values())


def test_non_finite_values_give_results_not_warnings():
    # pytest turns RuntimeWarnings into errors: metrics must stay quiet on inf/overflow
    huge = [1e300, 1.0]
    assert m("max_ulp", huge, huge) == 0.0  # both overflow to float32 inf
    assert m("max_ulp", [1e300], [np.inf]) == 0.0
    values = compute_metrics(np.array([np.inf, 1.0]), np.array([np.inf, 1.0]))
    assert math.isnan(values["rel_l2"])  # inf - inf: undefined, reported as NaN
    assert m("rel_l2", [np.inf, 1.0], [1.0, 1.0]) == math.inf
    assert m("wasserstein", [1e300, 0.0, 1.0], [0.0, 1.0, 2.0]) > 1e299


@pytest.mark.parametrize(
    "shape", [(1, 16, 320, 320), (1, 84, 8400), (2, 3, 5, 7), (3, 64, 33), (7,), (1, 1, 100_000)]
)
def test_channel_moments_of_float32_are_those_of_its_float64_values_bit_for_bit(shape):
    from anpred.analysis.metrics import channel_moments

    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) * 3.0 + 0.5).astype(np.float32)
    expected = channel_moments(x.astype(np.float64))
    assert np.array_equal(channel_moments(x), expected)
    assert np.array_equal(channel_moments(np.asfortranarray(x)), expected)
