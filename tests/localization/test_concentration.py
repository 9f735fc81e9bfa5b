import json

import numpy as np
import pytest

from anpred.errors import UsageError
from anpred.localization import gini, stage_concentration


@pytest.mark.parametrize("n", [1, 2, 5, 17])
def test_gini_of_equal_values_is_zero(n):
    assert gini([0.3] * n) == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("n", [2, 5, 17])
def test_gini_of_one_nonzero_is_n_minus_one_over_n(n):
    values = np.zeros(n)
    values[n // 2] = 4.0
    assert gini(values) == pytest.approx((n - 1) / n)


def test_gini_matches_mean_absolute_difference_definition():
    x = np.array([0.1, 3.0, 0.5, 0.0, 2.2, 7.0])
    expected = np.abs(x[:, None] - x[None, :]).sum() / (2 * x.size**2 * x.mean())
    assert gini(x) == pytest.approx(expected)
    assert gini([0.0, 0.0]) == 0.0
    with pytest.raises(UsageError):
        gini([1.0, -1.0])


def test_ranking_and_top_shares():
    conc = stage_concentration({"stem": 1.0, "l1": 6.0, "l2": 0.0, "l3": 2.0, "fc": 1.0})
    assert [s.stage for s in conc.ranking] == ["l1", "l3", "stem", "fc", "l2"]  # stable ties
    assert conc.total == pytest.approx(10.0)
    assert conc.top_stage == "l1"
    assert conc.top_shares == {1: pytest.approx(0.6), 3: pytest.approx(0.9)}
    assert conc.top_share(5) == pytest.approx(1.0)
    data = conc.to_dict()
    json.dumps(data, allow_nan=False)
    assert data["top_shares"] == {"1": pytest.approx(0.6), "3": pytest.approx(0.9)}


def test_all_zero_and_short_inputs():
    conc = stage_concentration({"a": 0.0, "b": 0.0})
    assert conc.gini == 0.0 and conc.top_shares[1] == 0.0
    assert stage_concentration({"a": 2.0}, top_k=(1, 3)).top_shares == {1: 1.0, 3: 1.0}
    with pytest.raises(UsageError):
        stage_concentration({"a": float("inf")})
    with pytest.raises(UsageError):
        stage_concentration({"a": 1.0}, top_k=(0,))
