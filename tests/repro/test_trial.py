"""A trial's numbers: the relative error the reproducer's floor and the bisection use."""

from __future__ import annotations

import math

import numpy as np

from anpred.repro.trial import relative_error


def test_relative_error_is_the_l2_distance_over_the_reference_norm() -> None:
    ref = np.array([3.0, 4.0])  # norm 5
    got = np.array([3.0, 4.5], dtype=np.float32)
    assert relative_error(got, ref) == 0.1
    assert relative_error(ref, ref) == 0.0
    assert relative_error(got, np.zeros(2)) == math.inf
