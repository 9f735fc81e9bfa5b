import json

import numpy as np
import pytest

from anpred.errors import UsageError
from anpred.localization import size_sweep, sweep_by_anchor


def test_power_law_gives_its_exponent_as_slope():
    sizes = [64, 640, 128, 320]  # unsorted on purpose
    errors = [3e-7 * s**1.5 for s in sizes]
    sweep = size_sweep(sizes, errors)
    assert sweep.sizes == (64.0, 128.0, 320.0, 640.0)
    assert sweep.slope == pytest.approx(1.5)
    assert sweep.trend == "increasing" and sweep.monotonic
    json.dumps(sweep.to_dict(), allow_nan=False)


def test_non_monotonic_decreasing_and_constant():
    sizes = [32, 64, 128, 256]
    bumpy = size_sweep(sizes, [1e-6, 4e-6, 2e-6, 8e-6])
    assert bumpy.trend == "non-monotonic" and bumpy.n_direction_changes == 2
    assert not bumpy.monotonic
    assert size_sweep(sizes, [4e-6, 3e-6, 2e-6, 1e-6]).trend == "decreasing"
    assert size_sweep(sizes, [2e-6] * 4).trend == "constant"
    assert size_sweep(sizes, [2e-6] * 4).slope == pytest.approx(0.0, abs=1e-12)


def test_log_tolerance_flattens_small_wiggles():
    sizes = [32, 64, 128]
    errors = [1e-6, 1.05e-6, 1.0e-6]
    assert size_sweep(sizes, errors).trend == "non-monotonic"
    assert size_sweep(sizes, errors, log_tolerance=np.log(1.1)).trend == "constant"


def test_zero_errors_are_floored_and_sweep_by_anchor():
    sweeps = sweep_by_anchor([1, 2], {"p3": [0.0, 0.0], "out": [1e-6, 4e-6]})
    assert sweeps["p3"].slope == pytest.approx(0.0, abs=1e-12) and sweeps["p3"].trend == "constant"
    assert sweeps["out"].slope == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("sizes", "errors"),
    [
        ([1], [1e-6]),
        ([1, 1], [1e-6, 1e-6]),
        ([0, 2], [1e-6, 1e-6]),
        ([1, 2], [1e-6, -1.0]),
        ([1, 2], [1e-6]),
    ],
)
def test_bad_sweeps_are_rejected(sizes, errors):
    with pytest.raises(UsageError):
        size_sweep(sizes, errors)
