"""The compiled radix sorts give np.sort's values (the Wasserstein sums rest on them)."""

import numpy as np
import pytest

compiled = pytest.importorskip("anpred.analysis.compiled")


def _awkward(n: int, dtype: type, seed: int) -> np.ndarray:
    """Values that exercise every digit and the sign handling: both zeros, subnormals,
    extremes, duplicates, negatives, runs already sorted and reversed."""
    rng = np.random.default_rng(seed)
    info = np.finfo(dtype)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)).astype(dtype)
    special = np.array(
        [0.0, -0.0, info.tiny, -info.tiny, info.tiny / 4, -info.tiny / 4, info.max, -info.max,
         info.eps, 1.0, -1.0, 1.0, 1.0],
        dtype=dtype,
    )  # fmt: skip
    x[: min(n, special.size)] = special[: min(n, special.size)]
    if n > 100:
        x[20:60] = np.sort(x[20:60])  # an ascending run
        x[60:100] = np.sort(x[60:100])[::-1]  # a descending one
    return x


@pytest.mark.parametrize("n", [0, 1, 2, 13, 2049, 100_003])
def test_sort_rows_gives_the_values_of_np_sort(n):
    rows = np.stack([_awkward(n, np.float32, seed) for seed in range(3)])
    expected = np.sort(rows, axis=1)
    compiled.sort_rows(rows)
    assert rows.dtype == np.float32
    assert np.array_equal(rows, expected)  # -0.0 == +0.0, as np.sort leaves their order open


@pytest.mark.parametrize("n", [0, 1, 2, 13, 2049, 100_003])
def test_sorted64_gives_the_values_of_np_sort_and_leaves_its_input(n):
    x = _awkward(n, np.float64, 7)
    before = x.copy()
    x.setflags(write=False)  # as the fp64 reference comes: a view of the mapped capture
    got = compiled.sorted64(x)
    assert np.array_equal(got, np.sort(x))
    assert np.array_equal(x, before, equal_nan=True) and x is not got


def test_a_digit_every_key_shares_is_skipped_without_losing_the_order():
    # every key has the same top digit (values in [1, 2)), and the same middle digit too
    # where only the lowest mantissa bits differ
    rng = np.random.default_rng(3)
    narrow = (1.0 + rng.integers(0, 2048, (2, 5000)) * np.float32(2.0**-23)).astype(np.float32)
    expected = np.sort(narrow, axis=1)
    compiled.sort_rows(narrow)
    assert np.array_equal(narrow, expected)
    wide = 1.5 + rng.integers(0, 2048, 5000) * 2.0**-52
    assert np.array_equal(compiled.sorted64(wide), np.sort(wide))


def test_zeros_come_negative_first():
    rows = np.array([[0.0, -0.0, 0.0, -0.0]], dtype=np.float32)
    compiled.sort_rows(rows)
    assert list(np.signbit(rows[0])) == [True, True, False, False]
