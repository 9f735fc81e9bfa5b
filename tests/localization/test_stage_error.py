import json
import math

import numpy as np
import pytest

from anpred.analysis import get_metric
from anpred.errors import UsageError
from anpred.localization import relative_l2, stage_isolation
from anpred.localization.stage_error import IntroducedErrors


def test_relative_l2_known_values():
    ref = np.array([3.0, 4.0])
    assert relative_l2(np.array([3.0, 4.5], dtype=np.float32), ref) == pytest.approx(0.1)
    assert relative_l2(ref, ref) == 0.0
    assert relative_l2(np.array([np.nan, 4.0]), ref) == math.inf
    with pytest.raises(UsageError, match="shapes differ"):
        relative_l2(np.zeros(3), ref)
    with pytest.raises(UsageError, match="must be finite"):
        relative_l2(ref, np.array([np.inf, 4.0]))


def test_relative_l2_follows_the_metrics_rule_for_a_zero_reference():
    """One relative L2: stage isolation's is the oracle's ``rel_l2`` (no absolute
    fallback), so introduced errors and verdicts use one zero rule and one resolution."""
    zero = np.zeros(2)
    assert relative_l2(zero, zero) == 0.0
    assert relative_l2(np.array([0.0, 2.0]), zero) == math.inf  # was 2.0 (absolute norm)
    subnormal = np.array([1e-39, 0.0])  # below the smallest normal float32: zero
    assert relative_l2(zero, subnormal) == 0.0  # a flushed subnormal is no error
    assert relative_l2(np.array([1.0, 0.0]), subnormal) == math.inf
    assert relative_l2(np.array([np.nan, 0.0]), zero) == math.inf  # non-finite: inf
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((3, 70_000))  # more than one block of the metric
    x = (ref * (1 + 1e-6 * rng.standard_normal(ref.shape))).astype(np.float32)
    assert relative_l2(x, ref) == get_metric("rel_l2")(x.astype(np.float64), ref)


def test_introduced_errors_are_relative_l2_bit_for_bit():
    """The analysis sums the reference's norm once per anchor: same number, every case."""
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((3, 70_000))  # more than one block of the metric
    near = (ref * (1 + 1e-6 * rng.standard_normal(ref.shape))).astype(np.float32)
    nan, inf = near.copy(), near.copy()
    nan[1, 5], inf[2, 7] = np.nan, -np.inf
    cases = [near, ref, nan, inf, np.zeros_like(ref), -ref]
    errors = IntroducedErrors(ref)
    assert [errors(x) for x in cases] == [relative_l2(x, ref) for x in cases]
    assert errors(nan) == errors(inf) == math.inf
    # float32 stage outputs are taken as they are (the analysis keeps them float32)
    assert [errors(x) for x in (near, nan, inf)] == [
        errors(x.astype(np.float64)) for x in (near, nan, inf)
    ]
    zero = IntroducedErrors(np.zeros(2))  # the zero-reference rule holds too
    assert zero(np.zeros(2)) == 0.0 and zero(np.array([0.0, 2.0])) == math.inf
    with pytest.raises(UsageError, match="shapes differ"):
        errors(np.zeros(3))
    with pytest.raises(UsageError, match="must be finite"):
        IntroducedErrors(np.array([np.inf, 4.0]))


def test_introduced_inherited_total_and_ratio():
    ref = {"s1": np.array([1.0, 0.0]), "s2": np.array([0.0, 2.0])}
    isolated = {"s1": np.array([1.1, 0.0]), "s2": np.array([0.0, 2.0])}
    end_to_end = {"s1": np.array([1.1, 0.0]), "s2": np.array([0.0, 2.4])}
    iso = stage_isolation(["s1", "s2"], isolated, ref, end_to_end, input_deviation=0.01)
    s1, s2 = iso.stages
    assert (s1.introduced, s1.inherited, s1.total) == pytest.approx((0.1, 0.01, 0.1))
    assert s1.introduced_ratio == pytest.approx(1.0)
    # s2 adds nothing itself: all 0.2 of its total is inherited (amplified) error
    assert (s2.introduced, s2.inherited, s2.total) == pytest.approx((0.0, 0.1, 0.2))
    assert s2.introduced_ratio == 0.0
    assert iso.introduced() == {"s1": pytest.approx(0.1), "s2": 0.0}
    json.dumps(iso.to_dict(), allow_nan=False)


def test_non_finite_and_missing_stages():
    ref = {"s1": np.ones(2)}
    iso = stage_isolation(["s1"], {"s1": np.array([np.inf, 1.0])}, ref, {"s1": np.ones(2)})
    assert iso.stages[0].introduced == math.inf and iso.stages[0].introduced_ratio is None
    assert iso.to_dict()["stages"][0]["introduced"] is None
    with pytest.raises(UsageError, match="missing from end_to_end"):
        stage_isolation(["s1"], ref, ref, {})
