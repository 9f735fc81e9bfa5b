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
* the medians are selections on the magnitudes' bit patterns (:func:`magnitude_ranks`), whose
  order is the values' order: the values ``np.partition`` selects.

A participant's output may come as the float32 array it is (``a``, ``res``): each value is
widened to float64 before any operation, as NumPy widens it when it mixes float32 and
float64 arrays, so the numbers are those of its float64 copy, without the copy.

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
def fp64_errors(a: np.ndarray, f: np.ndarray, absolute: np.ndarray, squares: np.ndarray) -> None:
    """``absolute = |a − f|`` and ``squares = (a − f)²`` of flat arrays of one size, ``f``
    float64: the values of ``np.abs(a − f)`` and ``np.square(f − a)`` (a difference and its
    negation have one square).
    """
    for i in range(a.size):
        d = a[i] - f[i]
        absolute[i] = abs(d)
        squares[i] = d * d


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


DIGIT_BITS = 16
"""Bits per level of :func:`magnitude_ranks`: four levels cover a key's 63 bits."""


@njit(cache=True, nogil=True, error_model="numpy")
def magnitude_ranks(keys: np.ndarray, rank: int) -> tuple[int, int]:
    """The keys of rank ``rank`` and ``rank − 1`` (0-based, ascending) of non-negative int64
    ``keys`` (``rank − 1``: -1 when ``rank`` is 0), by a radix selection from the top digit.

    Float64 magnitudes' bit patterns (no NaN, no -0.0) are such keys, in their values'
    order, so these are the values ``np.partition`` puts at ``rank`` and the largest before
    it. Each level counts the candidates' digits and keeps the bucket of the rank; the
    largest key of the buckets below is the one below the rank when the rank is first in
    its bucket. Ties cost nothing more (``np.partition`` slows down by 10-20x on outputs
    that equal the reference in most elements: yolov8n's jax output on one photograph).
    """
    lower = np.int64(-1)
    candidates = keys
    width = 1 << DIGIT_BITS
    for level in range(4):
        shift = DIGIT_BITS * (3 - level)
        counts = np.zeros(width, np.int64)
        for i in range(candidates.size):
            counts[(candidates[i] >> shift) & (width - 1)] += 1
        below = 0
        bucket = 0
        while below + counts[bucket] <= rank:
            below += counts[bucket]
            bucket += 1
        if counts[bucket] == candidates.size:  # every candidate has this digit
            continue
        kept = np.empty(counts[bucket], np.int64)
        j = 0
        for i in range(candidates.size):
            key = candidates[i]
            digit = (key >> shift) & (width - 1)
            if digit == bucket:
                kept[j] = key
                j += 1
            elif digit < bucket and key > lower:
                lower = key
        rank -= below
        candidates = kept
    upper = candidates[0]  # every candidate left is equal
    return upper, upper if rank > 0 else lower


KERNELS = (compare_outputs, max_abs_difference, fp64_errors, torch_allclose, magnitude_ranks)
"""The entry points :mod:`anpred.analysis.baselines` calls."""


def warm() -> None:
    """Load (or compile) every entry point, on tiny arrays of the types the baselines pass:
    outputs float64 or float32 (as aligned), references float64.
    """
    x = np.arange(1.0, 4.0)
    for a in (x, x.astype(np.float32)):
        out = np.empty(3), np.empty(3)
        compare_outputs(a, x, x, 1e-5, 1e-5, *out)
        max_abs_difference(a, x)
        fp64_errors(a, x, *out)
        torch_allclose(x, a, 1e-4)
    magnitude_ranks(x.view(np.int64), 1)
