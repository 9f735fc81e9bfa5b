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

Compare-exchanges over blocks of the arrays (``np.minimum``/``np.maximum`` into reused
buffers) stream memory once; for six arrays of 1.6 M elements this is several times
faster than ``np.median`` along the participant axis (measured 0.07 s vs 0.28 s before
blocking), which copies and partitions every element's participant column."""

BLOCK = 1 << 16
"""Elements per block (each of the P + 1 work buffers holds one block)."""


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
        return _nanmedian(stacked) if has_nan else np.median(stacked, axis=0)
    return _network_median([np.asarray(a).reshape(-1) for a in arrays]).reshape(shape)


def _network_median(flats: list[np.ndarray]) -> np.ndarray:
    """Median of flat arrays by a sorting network, block by block."""
    count, size = len(flats), flats[0].size
    result = np.empty(size, dtype=np.float64)
    buffers = [np.empty(min(size, BLOCK), dtype=np.float64) for _ in range(count + 1)]
    comparators = _comparators(count)
    middle = count // 2
    for start in range(0, size, BLOCK):
        n = min(BLOCK, size - start)
        wires = [b[:n] for b in buffers[:count]]
        scratch = buffers[count][:n]
        for wire, flat in zip(wires, flats, strict=True):
            wire[:] = flat[start : start + n]
        for i, j in comparators:
            np.minimum(wires[i], wires[j], out=scratch)
            np.maximum(wires[i], wires[j], out=wires[j])
            wires[i], scratch = scratch, wires[i]
        out = result[start : start + n]
        if count % 2:
            out[:] = wires[middle]
        else:
            with np.errstate(invalid="ignore"):  # −inf and +inf in the middle: NaN
                np.add(wires[middle - 1], wires[middle], out=out)
            out *= 0.5
    return result


def _nanmedian(stacked: np.ndarray) -> np.ndarray:
    all_nan = np.isnan(stacked).all(axis=0)
    if not all_nan.any():
        return np.nanmedian(stacked, axis=0)
    filled = np.where(all_nan, 0.0, stacked)
    result = np.nanmedian(filled, axis=0)
    result[all_nan] = np.nan
    return result
