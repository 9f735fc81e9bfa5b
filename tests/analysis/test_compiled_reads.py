"""The compiled loops that read captures give NumPy's values bit for bit: alignment's
channels-first copy, the finiteness checks, the introduced error's differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from anpred.analysis import align, onepass
from anpred.analysis.metrics import block_sum_of_squares, relative_l2_given
from anpred.analysis.oracle.evidence import _new_non_finite

reads = pytest.importorskip("anpred.analysis.compiled_reads")


@pytest.fixture(params=[True, False], ids=["compiled", "numpy"])
def compiled(request):
    if request.param and onepass.kernels() is None:
        pytest.skip("numba is not installed")
    previous = onepass.use_compiled(request.param)
    yield request.param
    onepass.use_compiled(previous)


@pytest.mark.parametrize(
    ("shape", "layout"),
    [
        ((1, 7, 5, 3), "NHWC"),
        ((2, 130, 3), "NWC"),
        ((1, 2, 3, 70, 4), "NDHWC"),
        ((1, 1, 1, 9), "NHWC"),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_channels_last_capture_is_copied_channels_first_exactly(
    compiled, shape, layout, dtype, monkeypatch
):
    copies = []
    loop = reads.channels_first
    monkeypatch.setattr(reads, "channels_first", lambda *a: copies.append(1) or loop(*a))
    rng = np.random.default_rng(len(shape))
    capture = rng.standard_normal(shape).astype(dtype)
    capture.reshape(-1)[:3] = (-0.0, np.inf, np.nan)
    order = [0, len(shape) - 1, *range(1, len(shape) - 1)]
    expected = np.ascontiguousarray(capture.transpose(order))
    aligned = align(capture, expected.shape, layout, keep_float32=True)
    assert aligned.values.dtype == dtype and aligned.values.flags.c_contiguous
    assert aligned.values.tobytes() == expected.tobytes()  # bit for bit, -0.0 and NaN too
    # the loop copies what NumPy would copy strided (a view with unit axes may be contiguous)
    assert len(copies) == (compiled and not capture.transpose(order).flags.c_contiguous)
    wide = align(capture, expected.shape, layout).values  # float32 to float64: NumPy's copy
    assert wide.dtype == np.float64 and np.array_equal(wide, expected, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bad", [None, np.inf, -np.inf, np.nan])
def test_finiteness_checks_say_what_isfinite_says(dtype, bad):
    info = np.finfo(dtype)
    x = np.array([0.0, -0.0, info.tiny / 4, info.max, -info.max, 1.0] * 700, dtype=dtype)
    if bad is not None:
        x[-1 if bad is np.nan else 1234] = bad
    expected = bool(np.isfinite(x).all())
    assert reads.all_finite(x) is expected
    out = np.empty_like(x)
    assert reads.copy_finite(x, out) is expected
    assert out.tobytes() == x.tobytes()


@pytest.mark.parametrize("size", [1, 1000, 65536, 200_001])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_introduced_errors_are_the_same_with_the_compiled_difference(size, dtype):
    rng = np.random.default_rng(size)
    c = rng.standard_normal(size) * 10.0 ** rng.integers(-20, 20, size)
    x = (c * (1 + 1e-6 * rng.standard_normal(size))).astype(dtype)
    cases = [x]
    if size > 1:
        cases += [np.where(np.arange(size) == size // 2, np.inf, x).astype(dtype)]
        cases += [np.where(np.arange(size) == 0, np.nan, x).astype(dtype)]
    squares = block_sum_of_squares(c)
    for case in cases:
        got = {}
        for wanted in (True, False):
            if wanted and onepass.kernels() is None:
                continue
            previous = onepass.use_compiled(wanted)
            try:
                got[wanted] = relative_l2_given(case, c, squares)
            finally:
                onepass.use_compiled(previous)
        values = list(got.values())
        assert all(v == values[0] or (math.isnan(v) and math.isnan(values[0])) for v in values)


def test_new_non_finite_counts_as_before(compiled):
    fp64 = np.linspace(-1.0, 1.0, 5000)
    fp64[7] = np.inf  # the reference's own non-finite value is not new
    x = fp64.astype(np.float32)
    assert _new_non_finite(x, fp64) == 0
    x[[3, 7, 4000]] = (np.nan, np.nan, -np.inf)
    assert _new_non_finite(x, fp64) == 2
    assert _new_non_finite(x[::2], fp64[::2]) == 1  # not contiguous: NumPy's count
