import json
import math

import numpy as np
import pytest

from anpred.errors import UsageError
from anpred.localization import (
    DEFAULT_DEVIATION_FLOOR,
    count_direction_changes,
    propagation_profile,
)

ANCHORS = ("a", "b", "c", "d", "e")


def test_gains_directions_and_extremes_on_a_known_profile():
    profile = propagation_profile(ANCHORS, [1e-6, 1e-3, 1.2e-3, 1e-5, 1e-4])
    np.testing.assert_allclose(profile.gains, [1e3, 1.2, 1e-5 / 1.2e-3, 10.0])
    # 1.2 lies within the default flat band [1/1.5, 1.5]
    assert profile.directions == (1, 0, -1, 1)
    assert profile.n_direction_changes == 2
    assert not profile.monotonic
    amp, att = profile.max_amplification, profile.max_attenuation
    assert (amp.source, amp.target, amp.position) == ("a", "b", 1)
    assert amp.gain == pytest.approx(1e3)
    assert (att.source, att.target, att.position) == ("c", "d", 3)
    assert att.gain == pytest.approx(1e-5 / 1.2e-3)
    json.dumps(profile.to_dict(), allow_nan=False)


def test_small_changes_within_the_tolerance_are_not_direction_changes():
    devs = [1e-4, 1.3e-4, 1.1e-4, 1.4e-4, 1.2e-4]
    assert propagation_profile(ANCHORS, devs).n_direction_changes == 0
    assert propagation_profile(ANCHORS, devs, log_gain_tolerance=0.0).n_direction_changes == 3


def test_zero_deviations_are_floored():
    profile = propagation_profile(ANCHORS[:3], [0.0, 0.0, 1e-5])
    assert profile.gains[0] == 1.0
    assert profile.gains[1] == pytest.approx(1e-5 / DEFAULT_DEVIATION_FLOOR)
    assert all(math.isfinite(g) for g in profile.gains)
    custom = propagation_profile(ANCHORS[:2], [0.0, 1e-5], deviation_floor=1e-6)
    assert custom.gains[0] == pytest.approx(10.0)


def test_monotonic_growth_has_no_attenuation():
    profile = propagation_profile(ANCHORS, [1e-7, 1e-6, 1e-5, 1e-4, 1e-3])
    assert profile.monotonic and profile.max_attenuation is None
    assert profile.max_amplification.gain == pytest.approx(10.0)


def test_count_direction_changes_skips_flat_steps():
    assert count_direction_changes([1, 0, 0, -1, 0, -1, 1]) == 2
    assert count_direction_changes([0, 0]) == 0


@pytest.mark.parametrize(
    "devs",
    [[1e-6, 1e-5], [1e-6, -1e-5, 1e-5, 1e-5, 1e-5], [1e-6, np.nan, 1e-5, 1e-5, 1e-5]],
)
def test_bad_deviations_are_rejected(devs):
    with pytest.raises(UsageError):
        propagation_profile(ANCHORS, devs)
