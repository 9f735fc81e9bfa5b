"""Compiled loops of the output-level baselines (numba): the same numbers, fewer passes.

The baselines (:mod:`anpred.analysis.baselines`) compare every participant's output with
the references element by element: Polygraphy's comparison took a dozen NumPy passes over
float64 temporaries per participant and two selections for its medians, the max-abs
thresholds three more passes each, ``torch.allclose`` five. Measured on yolov8n's output
(1 × 84 × 8400, six libraries and the fp32 reference), a fifth of the analysis pass went
there. These loops give the same values bit for bit, so the baselines take them whenever
the analysis uses the compiled loops (:func:`anpred.analysis.onepass.kernels`):

* element-wise values (``|a − b|``, ``|a − b| / s``) are the same IEEE operations, written
  to the arrays NumPy would have formed; their means stay NumPy's (its pairwise sums);
* maxima, counts and comparisons are exact; NaN propagates as in ``np.max``;
* the medians stay NumPy's selections (a radix selection here was no faster on real
  output differences, whose many ties fill its buckets).

No ``fastmath``: nothing here may be reordered.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, error_model="numpy")
def compare_outputs(
    a: np.ndarray,
    b: np.ndarray,
    scale: np.ndarray,
    atol: float,
    rtol: float,
    absdiff: np.ndarray,
    reldiff: np.ndarray,
) -> tuple[int, float, float]:
    """Polygraphy's element-wise comparison in one loop.

    Writes ``absdiff = |a − b|`` and ``reldiff = absdiff / scale`` (flat float64 arrays of
    one size, at least one element) and returns the number of mismatches (``(absdiff >
    atol or NaN) and (reldiff > rtol or NaN)``) and both maxima (NaN when a value is NaN,
    as ``np.max``).
    """
    count = 0
    max_abs = -np.inf
    max_rel = -np.inf
    nan_abs = False
    nan_rel = False
    for i in range(a.size):
        d = abs(a[i] - b[i])
        r = d / scale[i]
        absdiff[i] = d
        reldiff[i] = r
        if (d > atol or np.isnan(d)) and (r > rtol or np.isnan(r)):
            count += 1
        if np.isnan(d):
            nan_abs = True
        elif d > max_abs:
            max_abs = d
        if np.isnan(r):
            nan_rel = True
        elif r > max_rel:
            max_rel = r
    return count, np.nan if nan_abs else max_abs, np.nan if nan_rel else max_rel


@njit(cache=True, nogil=True, error_model="numpy")
def max_abs_difference(a: np.ndarray, b: np.ndarray) -> float:
    """``np.max(np.abs(a − b))`` of flat float64 arrays (at least one element)."""
    largest = -np.inf
    for i in range(a.size):
        d = abs(a[i] - b[i])
        if np.isnan(d):
            return np.nan
        if d > largest:
            largest = d
    return largest


@njit(cache=True, nogil=True, error_model="numpy")
def torch_allclose(ref: np.ndarray, res: np.ndarray, tol: float) -> bool:
    """``torch.allclose(ref, res, atol=tol, rtol=tol)`` of flat float64 arrays:
    ``|ref − res| <= tol + tol·|res|``, and ``ref == res`` where either is infinite.
    """
    for i in range(ref.size):
        x, y = ref[i], res[i]
        if np.isinf(x) or np.isinf(y):
            if not x == y:
                return False
        elif not abs(x - y) <= tol + tol * abs(y):  # NaN compares False
            return False
    return True


KERNELS = (compare_outputs, max_abs_difference, torch_allclose)
"""The entry points :mod:`anpred.analysis.baselines` calls."""


def warm() -> None:
    """Load (or compile) every entry point, on tiny arrays of the types the baselines pass."""
    x = np.arange(1.0, 4.0)
    out = np.empty(3), np.empty(3)
    compare_outputs(x, x, x, 1e-5, 1e-5, *out)
    max_abs_difference(x, x)
    torch_allclose(x, x, 1e-4)
