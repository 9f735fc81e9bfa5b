import json
import math

import numpy as np
import pytest

from anpred.errors import UsageError
from anpred.localization import relative_l2, stage_isolation


def test_relative_l2_known_values():
    ref = np.array([3.0, 4.0])
    assert relative_l2(np.array([3.0, 4.5], dtype=np.float32), ref) == pytest.approx(0.1)
    assert relative_l2(ref, ref) == 0.0
    assert relative_l2(np.array([0.0, 2.0]), np.zeros(2)) == 2.0  # absolute fallback
    assert relative_l2(np.array([np.nan, 4.0]), ref) == math.inf
    with pytest.raises(UsageError, match="shapes differ"):
        relative_l2(np.zeros(3), ref)


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
