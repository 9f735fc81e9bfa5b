import math

import numpy as np
import pytest

from anpred.analysis import metrics as metrics_module
from anpred.analysis import onepass
from anpred.analysis.metrics import get_metric, metric_names, register_metric
from anpred.analysis.onepass import measure_anchor, measure_generic
from anpred.analysis.ulp_keys import UlpKeys

# Sums of non-negative terms are added in another order than the generic path adds them:
# a few float64 roundings apart. Measured worst case over the tests of this file: 0 on the
# NumPy path, 1.4e-15 relative on the compiled one (its loops add in their own order
# inside a block); 1e-12 leaves a margin of ~700. Maxima (max_abs, max_ulp) and channel
# moments are exact on both.
REL = 1e-12
EXACT = {"max_abs", "max_ulp", "channel_moments"}


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def path(request, monkeypatch):
    """Every test runs on both paths: the numba loops and the NumPy blocks."""
    if request.param == "numpy":
        monkeypatch.setenv("ANPRED_NO_JIT", "1")
    else:
        monkeypatch.delenv("ANPRED_NO_JIT", raising=False)
        if onepass.kernels() is None:
            pytest.skip("numba is not installed")
    return request.param


def _same(got: float, expected: float, name: str) -> bool:
    if math.isnan(expected) or math.isinf(expected) or name in EXACT:
        return got == expected or (math.isnan(got) and math.isnan(expected))
    return math.isclose(got, expected, rel_tol=REL, abs_tol=1e-300)


def _assert_matches_generic(arrays, fp64, names=None):
    metrics = [get_metric(n) for n in (names or metric_names())]
    got, expected = measure_anchor(metrics, arrays, fp64), measure_generic(metrics, arrays, fp64)
    for table in ("vs_consensus", "vs_fp64"):
        for p in arrays:
            g, e = getattr(got, table)[p], getattr(expected, table)[p]
            assert list(g) == list(e)
            for n in e:
                assert _same(g[n], e[n], n), (table, p, n, g[n], e[n])
    for n, e in expected.consensus_vs_fp64.items():
        assert _same(got.consensus_vs_fp64[n], e, n), (n, got.consensus_vs_fp64[n], e)
    return got


def _captures(shape, count, seed=0, noise=1e-7):
    rng = np.random.default_rng(seed)
    fp64 = rng.standard_normal(shape) * 3.0
    arrays = {
        f"p{k}": (fp64 * (1 + noise * rng.standard_normal(shape)))
        .astype(np.float32)
        .astype(np.float64)
        for k in range(count)
    }
    return arrays, fp64


# 70_001 elements cross the 2**14 and 2**16 block boundaries with a ragged last block
@pytest.mark.parametrize("count", [2, 3, 5, 6, 7])
@pytest.mark.parametrize("shape", [(1, 7, 10_001), (70_001,), (2, 3, 5, 4)])
def test_every_metric_equals_the_generic_computation(count, shape):
    arrays, fp64 = _captures(shape, count, seed=count)
    got = _assert_matches_generic(arrays, fp64)
    assert got.vs_fp64["p0"]["rel_l2"] > 0.0 and got.vs_consensus["p1"]["max_ulp"] >= 1.0


def test_faults_scalings_float64_captures_and_zeros_match_too():
    arrays, fp64 = _captures((1, 16, 40, 40), 6, seed=3)
    bf16 = arrays["p1"].astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    arrays["p1"] = bf16.view(np.float32).astype(np.float64)  # a bf16-truncation fault
    arrays["p2"] = arrays["p2"] * (1 + 2.0**-20)  # scaled in float64: not float32 values
    arrays["p3"] = arrays["p3"].copy()
    arrays["p3"][0, 3] = 0.0  # one channel lost
    arrays["p4"] = -arrays["p4"]  # opposite signs: ULP distances near 2**32
    got = _assert_matches_generic(arrays, fp64)
    assert got.vs_consensus["p4"]["max_ulp"] > 2.0**31
    zeros = {p: np.zeros((1, 3, 5)) for p in ("a", "b", "c")}
    _assert_matches_generic(zeros, np.zeros((1, 3, 5)))
    _assert_matches_generic({**zeros, "d": np.ones((1, 3, 5))}, np.zeros((1, 3, 5)))


def test_values_beyond_float32_range_match_without_warnings():
    # pytest turns warnings into errors: a float32 overflow must stay quiet
    arrays, fp64 = _captures((1, 4, 9), 4, seed=5)
    arrays["p1"] = arrays["p1"] * 1e100  # finite squares, infinite float32 rounding
    _assert_matches_generic(arrays, fp64)
    arrays["p2"] = arrays["p2"] * 1e300  # infinite squares: the generic path
    _assert_matches_generic(arrays, fp64)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_keep_the_generic_conventions(bad):
    arrays, fp64 = _captures((1, 4, 9), 4, seed=1)
    arrays["p2"][0, 1, 2] = bad
    _assert_matches_generic(arrays, fp64)
    arrays, fp64 = _captures((1, 4, 9), 4, seed=1)
    fp64 = fp64.copy()
    fp64[0, 0, 0] = bad
    _assert_matches_generic(arrays, fp64)


def test_a_subset_of_metrics_and_unknown_metrics_are_computed_in_order(monkeypatch):
    monkeypatch.setattr(metrics_module, "_METRICS", dict(metrics_module._METRICS))
    register_metric("mean_shift")(lambda x, c: float(abs(np.mean(x) - np.mean(c))))
    arrays, fp64 = _captures((1, 5, 30), 5, seed=2)
    got = _assert_matches_generic(arrays, fp64, ["cosine", "mean_shift", "max_abs"])
    assert list(got.consensus_vs_fp64) == ["cosine", "mean_shift", "max_abs"]
    _assert_matches_generic(arrays, fp64, ["wasserstein"])
    _assert_matches_generic(arrays, fp64, ["mean_shift"])


def test_inputs_are_not_modified():
    arrays, fp64 = _captures((1, 3, 1000), 5, seed=4)
    copies = {p: x.copy() for p, x in arrays.items()}
    fp64_copy = fp64.copy()
    measure_anchor([get_metric(n) for n in metric_names()], arrays, fp64)
    assert all(np.array_equal(arrays[p], copies[p]) for p in arrays)
    assert np.array_equal(fp64, fp64_copy)


def test_unsigned_ulp_keys_give_the_signed_distance():
    values = np.array([0.0, -0.0, 1.0, -1.0, 3.0e38, -3.0e38, np.inf, -np.inf, 1e-45, -1e-45])
    keys = UlpKeys(values.size)
    a = keys.of(values, np.empty(values.size, np.int32)).copy()
    b = keys.of(-values, np.empty(values.size, np.int32)).copy()
    expected = get_metric("max_ulp")(values, -values)  # inf vs -inf: the largest distance
    assert keys.largest_distance(a, b) == expected == 2 * 0x7F800000


def test_non_contiguous_scalar_and_single_element_captures_match():
    arrays, fp64 = _captures((1, 6, 50, 7), 5, seed=6)
    transposed = {p: x.transpose(0, 1, 3, 2) for p, x in arrays.items()}  # views, not copies
    _assert_matches_generic(transposed, fp64.transpose(0, 1, 3, 2))
    for shape in [(), (1,), (1, 1, 1, 1)]:
        arrays, fp64 = _captures(shape, 4, seed=7)
        _assert_matches_generic(arrays, fp64)


def test_float32_captures_take_the_compiled_loops_and_others_the_numpy_path(path, monkeypatch):
    calls = []
    first_pass = onepass._first_pass
    monkeypatch.setattr(onepass, "_first_pass", lambda *a: calls.append(1) or first_pass(*a))
    arrays, fp64 = _captures((1, 8, 30, 30), 6, seed=8)
    _assert_matches_generic(arrays, fp64)
    assert len(calls) == (path == "numpy")
    arrays["p2"] = arrays["p2"] * (1 + 2.0**-30)  # float64 values: not float32-exact
    calls.clear()
    _assert_matches_generic(arrays, fp64)
    assert len(calls) == 1


@pytest.mark.parametrize("shape", [(1, 7, 10_001), (70_001,), (2, 3, 5, 4), (1, 16, 40, 40)])
def test_float32_captures_give_the_numbers_of_their_float64_values(shape):
    arrays, fp64 = _captures(shape, 6, seed=9)
    metrics = [get_metric(n) for n in metric_names()]
    narrow = {p: x.astype(np.float32) for p, x in arrays.items()}
    narrow["p1"] = arrays["p1"]  # float32 and float64 captures side by side
    assert measure_anchor(metrics, narrow, fp64) == measure_anchor(metrics, arrays, fp64)
    transposed = {p: x.T for p, x in narrow.items()}  # non-contiguous float32 views
    wide = {p: x.T for p, x in arrays.items()}
    assert measure_anchor(metrics, transposed, fp64.T) == measure_anchor(metrics, wide, fp64.T)


def test_float32_captures_with_a_non_finite_value_or_beside_an_inexact_one_match_too():
    arrays, fp64 = _captures((1, 8, 30, 30), 6, seed=10)
    metrics = [get_metric(n) for n in metric_names()]
    arrays["p2"] = arrays["p2"] * (1 + 2.0**-30)  # not float32-exact: the NumPy path
    narrow = {p: x.astype(np.float32) if p != "p2" else x for p, x in arrays.items()}
    assert measure_anchor(metrics, narrow, fp64) == measure_anchor(metrics, arrays, fp64)
    arrays["p3"] = arrays["p3"].copy()
    arrays["p3"][0, 3, 4, 5] = np.inf  # the generic path
    narrow = {p: x.astype(np.float32) if p != "p2" else x for p, x in arrays.items()}
    got, expected = measure_anchor(metrics, narrow, fp64), measure_anchor(metrics, arrays, fp64)
    assert repr(got) == repr(expected)  # NaN metrics compare unequal; their text does not
