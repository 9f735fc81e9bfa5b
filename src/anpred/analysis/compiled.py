"""Compiled loops of the one-pass kernel (numba): each capture read once per pass.

:mod:`anpred.analysis.onepass` computes the oracle's built-in metrics of one anchor with
NumPy calls over blocks: about twenty calls per participant and block, each a pass over
memory, and the Python between them. The loops here fuse them: per piece of
:data:`PIECE` elements (in L1/L2 cache) the consensus's and the fp64 reference's float32
ULP keys and unit vectors are formed once, then every capture is compared against both
in one loop; Wasserstein's sorts are radix sorts of the values' order-preserving unsigned
keys (:func:`sort_rows`, :func:`sorted64`: the values ``np.sort`` gives, in linear time).
Compiled by numba (``cache=True``: once per machine, then loaded from
``__pycache__``), used when numba imports and ``ANPRED_NO_JIT`` is not set; otherwise the
NumPy path runs. Both give the same numbers:

* every value is formed by the same float64 operations as the generic metrics
  (``x − c``, ``x/‖x‖ − c/‖c‖``, the float32 rounding and ULP key of ``max_ulp``, the
  median's ``(a + b) · 0.5`` of float32 values); the sums' loops may reassociate and
  fuse additions (``fastmath`` ``reassoc``/``contract``, so that they vectorize), never
  divisions (no ``arcp``/``afn``), and assume no NaN or inf, which the caller has ruled
  out (:func:`anpred.analysis.onepass._compiled` takes this path only for finite
  float32-exact captures);
* sums are taken per :data:`anpred.analysis.metrics.BLOCK` block and the block sums added
  in order, as the generic metrics add them; inside a block the order differs (NumPy
  adds pairwise or by SIMD lanes): a few float64 roundings apart, which
  ``tests/analysis/test_onepass.py`` bounds at 1e-12 relative for both paths. Maxima and
  medians are exact.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit

PIECE = 2048
"""Elements per piece of the fused loops: the consensus's and fp64's keys, units and values
of one piece (6 × 8 bytes × 2048 = 96 KiB) stay in cache while every capture reads them."""

SUMS = {"nnan", "ninf", "nsz", "reassoc", "contract"}
"""fastmath flags of the loops that sum: reorder and fuse additions, no NaN/inf (ruled out
by the caller); never ``arcp`` or ``afn``, which would change divisions. (A set: numba
refuses a frozenset. Flags act on the function that carries them, so the summing loops
are functions of their own, not ``inline="always"``, which would give them the caller's.)"""

KEY_MASK = 0x7FFFFFFF


@njit(cache=True, nogil=True, error_model="numpy")
def round_to_float32(x: np.ndarray, narrow: np.ndarray) -> bool:
    """Write float32(``x``) into ``narrow``; return whether every value was exact.

    NaN is never exact (as ``np.equal``), nor is a finite value beyond float32's range.
    """
    exact = True
    for i in range(x.size):
        v = np.float32(x[i])
        narrow[i] = v
        exact &= np.float64(v) == x[i]
    return exact


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _keys(bits: np.ndarray, out: np.ndarray, m: int) -> None:
    """ULP keys of float32 bit patterns (``metrics._ordered_float32``'s mapping), as int64."""
    for e in range(m):
        b = np.int64(bits[e])
        sign = b >> 31
        out[e] = (b ^ (sign & KEY_MASK)) - sign


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _median_piece(
    narrow: np.ndarray,
    start: int,
    m: int,
    comparators: np.ndarray,
    wires: np.ndarray,
    out: np.ndarray,
) -> None:
    """Median of the rows of ``narrow`` over ``[start, start + m)`` into ``out[:m]``.

    A sorting network of min/max over the piece (``comparators``: K × 2 wire pairs), then
    the middle wire, or the float64 mean of the two middle ones: the value of the
    generic sorting network for any NaN-free input.
    """
    count = narrow.shape[0]
    for p in range(count):
        for e in range(m):
            wires[p, e] = narrow[p, start + e]
    for k in range(comparators.shape[0]):
        i, j = comparators[k, 0], comparators[k, 1]
        for e in range(m):
            a, b = wires[i, e], wires[j, e]
            wires[i, e] = a if a < b else b
            wires[j, e] = b if a < b else a
    middle = count // 2
    if count % 2:
        for e in range(m):
            out[e] = np.float64(wires[middle, e])
    else:
        for e in range(m):
            out[e] = (np.float64(wires[middle - 1, e]) + np.float64(wires[middle, e])) * 0.5


@njit(cache=True, nogil=True, error_model="numpy")
def row_medians(narrow: np.ndarray, comparators: np.ndarray, out: np.ndarray) -> None:
    """Element-wise median of the rows of ``narrow`` (P × N float32, NaN-free) into ``out``.

    Args:
        narrow: The captures, one per row.
        comparators: A sorting network on P wires (K × 2, see :mod:`.consensus`).
        out: float64, N elements.
    """
    count, n = narrow.shape
    wires = np.empty((count, PIECE), dtype=np.float32)
    for start in range(0, n, PIECE):
        m = min(PIECE, n - start)
        _median_piece(narrow, start, m, comparators, wires, out[start : start + m])


@njit(cache=True, nogil=True, error_model="numpy", fastmath=SUMS)
def _against(
    x: np.ndarray,
    keys_x: np.ndarray,
    ref: np.ndarray,
    keys_ref: np.ndarray,
    m: int,
    absolute: np.ndarray,
) -> tuple[float, int, int]:
    """Σ (x − ref)², max |x − ref| as int64 bits, and the largest ULP-key distance over a
    piece (``absolute``: float64 scratch of at least ``m``).

    The largest |x − ref| is taken on the bit patterns, whose order is the values' order
    for non-negative floats: a float maximum does not vectorize, an integer one does.
    """
    squares = 0.0
    ulps = 0
    for e in range(m):
        d = np.float64(x[e]) - ref[e]
        squares += d * d
        absolute[e] = abs(d)
        ulps = max(ulps, abs(keys_x[e] - keys_ref[e]))
    largest = 0
    bits = absolute.view(np.int64)
    for e in range(m):
        largest = max(largest, bits[e])
    return squares, largest, ulps


@njit(cache=True, nogil=True, error_model="numpy")
def _unit(x: np.ndarray, norm: float, unit: np.ndarray, m: int) -> None:
    """``x / ‖x‖`` over a piece into ``unit`` (the division as the generic cosine divides)."""
    for e in range(m):
        unit[e] = np.float64(x[e]) / norm


@njit(cache=True, nogil=True, error_model="numpy", fastmath=SUMS)
def _cosine_squares(unit_x: np.ndarray, unit: np.ndarray, m: int) -> float:
    """Σ (x/‖x‖ − unit)² over a piece, given ``x/‖x‖``."""
    total = 0.0
    for e in range(m):
        t = unit_x[e] - unit[e]
        total += t * t
    return total


@njit(cache=True, nogil=True, error_model="numpy")
def row_sums(
    narrow: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    norms: np.ndarray,
    cosine: np.ndarray,
    block: int,
) -> np.ndarray:
    """Element-wise sums and maxima of every row of ``narrow`` and of ``c`` against ``c``
    (the consensus) and ``f`` (the fp64 reference).

    Args:
        narrow: P × N float32 captures (each row's values exactly).
        c: The consensus, flat float64 of N elements.
        f: The fp64 reference, flat float64 of N elements.
        norms: P + 3 norms: each row's, then ‖c‖ (as a row), then ‖c‖ and ‖f‖ as
            references; each summed as ``metrics.l2_norm`` sums it.
        cosine: (P + 1) × 2 booleans: whether to sum row r's cosine squares against
            reference k (0 = c, 1 = f).
        block: Elements per block of the sums.

    Returns:
        ``out[r, k] = [Σ (x − ref)², max |x − ref|, max ULP32(x, ref), Σ (x/‖x‖ − ref/‖ref‖)²]``
        for rows r = 0..P−1 (the captures) and r = P (the consensus), references k = 0
        (c) and 1 (f); the consensus against itself (r = P, k = 0) is left zero.
    """
    count, n = narrow.shape
    out = np.zeros((count + 1, 2, 4))
    sums = np.zeros((count + 1, 2, 2))  # one block's Σ (x − ref)² and cosine squares
    bits = narrow.view(np.int32)
    rounded = np.empty((2, PIECE), dtype=np.float32)  # float32(c), float32(f)
    rounded_bits = rounded.view(np.int32)
    keys = np.empty((count + 1, PIECE), dtype=np.int64)  # row r's keys, c's at r = P
    keys_f = np.empty(PIECE, dtype=np.int64)
    units = np.empty((2, PIECE))
    unit_x = np.empty(PIECE)  # a row's x/‖x‖
    absolute = np.empty(PIECE)
    largest = np.zeros((count + 1, 2), dtype=np.int64)  # max |x − ref| as float64 bits
    refs = (c, f)
    for block_start in range(0, n, block):
        sums[:] = 0.0
        for start in range(block_start, min(n, block_start + block), PIECE):
            m = min(PIECE, n - start)
            for k in range(2):
                ref = refs[k][start : start + m]
                for e in range(m):
                    rounded[k, e] = np.float32(ref[e])
                    units[k, e] = ref[e] / norms[count + 1 + k]
            _keys(rounded_bits[0], keys[count], m)
            _keys(rounded_bits[1], keys_f, m)
            for r in range(count + 1):
                if r < count:
                    x = narrow[r, start : start + m]
                    _keys(bits[r, start : start + m], keys[r], m)
                    if cosine[r, 0] or cosine[r, 1]:  # x/‖x‖ once for both references
                        _unit(x, norms[r], unit_x, m)
                for k in range(2):
                    if r == count and k == 0:
                        continue
                    ref, keys_ref = refs[k][start : start + m], keys[count] if k == 0 else keys_f
                    if r < count:
                        squares, bits_max, ulps = _against(x, keys[r], ref, keys_ref, m, absolute)
                    else:
                        x64 = c[start : start + m]
                        squares, bits_max, ulps = _against(x64, keys[r], ref, keys_ref, m, absolute)
                    sums[r, k, 0] += squares
                    largest[r, k] = max(largest[r, k], bits_max)
                    out[r, k, 2] = max(out[r, k, 2], ulps)
                    if cosine[r, k]:  # the consensus's unit vector is units[0] (‖c‖ alike)
                        unit = units[0] if r == count else unit_x
                        sums[r, k, 1] += _cosine_squares(unit, units[k], m)
        out[:, :, 0] += sums[:, :, 0]
        out[:, :, 3] += sums[:, :, 1]
    out[:, :, 1] = largest.view(np.float64)
    return out


@njit(cache=True, nogil=True, error_model="numpy", fastmath=SUMS)
def _absolute_sum(x: np.ndarray, ref: np.ndarray, m: int) -> float:
    """Σ |x − ref| over a piece."""
    total = 0.0
    for e in range(m):
        total += abs(np.float64(x[e]) - ref[e])
    return total


@njit(cache=True, nogil=True, error_model="numpy")
def wasserstein_sums(
    described: np.ndarray, comparators: np.ndarray, sf: np.ndarray, sc: np.ndarray, block: int
) -> tuple[np.ndarray, float]:
    """Wasserstein sums of sorted float32 descriptors against their median and fp64's.

    Args:
        described: P × N float32, each row sorted ascending.
        comparators: A sorting network on P wires (K × 2).
        sf: The fp64 reference, sorted (float64, N).
        sc: Output: the consensus descriptor (the rows' element-wise median, float64).
        block: Elements per block of the sums.

    Returns:
        ``(totals, consensus_total)``: ``totals[p] = [Σ |s_p − sc|, Σ |s_p − sf|]`` and
        ``Σ |sc − sf|``, each summed per block and the block sums added in order.
    """
    count, n = described.shape
    totals = np.zeros((count, 2))
    block_sums = np.zeros((count, 2))
    wires = np.empty((count, PIECE), dtype=np.float32)
    consensus_total = 0.0
    for block_start in range(0, n, block):
        block_sums[:] = 0.0
        consensus_sum = 0.0
        for start in range(block_start, min(n, block_start + block), PIECE):
            m = min(PIECE, n - start)
            median = sc[start : start + m]
            _median_piece(described, start, m, comparators, wires, median)
            fp64 = sf[start : start + m]
            for p in range(count):
                row = described[p, start : start + m]
                block_sums[p, 0] += _absolute_sum(row, median, m)
                block_sums[p, 1] += _absolute_sum(row, fp64, m)
            consensus_sum += _absolute_sum(median, fp64, m)
        totals += block_sums
        consensus_total += consensus_sum
    return totals, consensus_total


RADIX_BITS = 11
"""Bits per pass of the radix sorts: 2048 buckets (16 KiB of counts) stay in L1 while a
pass scatters; float32 keys take 3 passes (11 + 11 + 10 bits), float64 keys 6."""


@njit(cache=True, nogil=True, error_model="numpy")
def _radix_passes(keys: np.ndarray, spare: np.ndarray, bits: int) -> None:
    """Sort unsigned integer ``keys`` of ``bits`` bits ascending in place (LSD radix sort,
    ``spare`` as scratch). One pass counts every digit; a digit that every key shares is
    skipped (its pass would only copy).
    """
    n = keys.size
    digits = (bits + RADIX_BITS - 1) // RADIX_BITS
    width = 1 << RADIX_BITS
    mask = np.uint64(width - 1)
    counts = np.zeros((digits, width), dtype=np.int64)
    for i in range(n):
        k = np.uint64(keys[i])
        for d in range(digits):
            counts[d, (k >> np.uint64(RADIX_BITS * d)) & mask] += 1
    source, target = keys, spare
    for d in range(digits):
        row = counts[d]
        total = 0
        shared = False
        for b in range(width):
            c = row[b]
            shared |= c == n
            row[b] = total
            total += c
        if shared:
            continue
        shift = np.uint64(RADIX_BITS * d)
        for i in range(n):
            k = source[i]
            b = (np.uint64(k) >> shift) & mask
            target[row[b]] = k
            row[b] += 1
        source, target = target, source
    if source is not keys:
        keys[:] = source


@njit(cache=True, nogil=True, error_model="numpy")
def sort_rows(rows: np.ndarray) -> None:
    """Sort every row of a finite float32 P × N array ascending, in place: the values
    ``np.sort`` gives (-0.0 before +0.0), by a radix sort of their order-preserving
    unsigned keys (negative: every bit flipped; else the sign bit): about 5x faster than
    ``np.sort`` on yolov8n's captures.
    """
    spare = np.empty(rows.shape[1], dtype=np.uint32)
    sign, ones = np.uint32(1 << 31), np.uint32(0xFFFFFFFF)
    for p in range(rows.shape[0]):
        keys = rows[p].view(np.uint32)
        for i in range(keys.size):
            keys[i] ^= ones if keys[i] & sign else sign
        _radix_passes(keys, spare, 32)
        for i in range(keys.size):
            keys[i] ^= sign if keys[i] & sign else ones


@njit(cache=True, nogil=True, error_model="numpy")
def sorted64(x: np.ndarray) -> np.ndarray:
    """A sorted copy of finite float64 ``x`` (1-D): ``np.sort``'s values, -0.0 before
    +0.0, by the radix sort of :func:`sort_rows` (about 2x faster than ``np.sort``).
    """
    out = np.empty(x.size, dtype=np.float64)
    keys, source = out.view(np.uint64), x.view(np.uint64)
    sign, ones = np.uint64(1) << np.uint64(63), np.uint64(0xFFFFFFFFFFFFFFFF)
    for i in range(keys.size):
        keys[i] = source[i] ^ (ones if source[i] & sign else sign)
    _radix_passes(keys, np.empty(x.size, dtype=np.uint64), 64)
    for i in range(keys.size):
        keys[i] ^= sign if keys[i] & sign else ones
    return out


PROFILE_SUMS = {"nsz", "reassoc", "contract"}
"""fastmath flags of :func:`error_profile`: its sums may reorder (so that they vectorize);
NaN and inf are kept (they are what the profile's check looks for)."""


@njit(cache=True, nogil=True, error_model="numpy", fastmath=PROFILE_SUMS)
def error_profile(
    x: np.ndarray, ref: np.ndarray, channel_last: bool, per_channel: np.ndarray, spatial: np.ndarray
) -> float:
    """Sum ``|x − ref|`` per channel and per position, without forming the error tensor.

    Args:
        x: The capture, B × A × S (float32 or float64).
        ref: The reference, B × A × S (float64).
        channel_last: Channels on the last axis (S; positions on A), else on A (positions
            on S).
        per_channel: Output, zeroed: the sum per channel (float64).
        spatial: Output, zeroed: the sum per position over batch and channels (float64).

    Returns:
        The sum of every error: NaN or inf when an error is not finite (or the sum
        overflows), which the caller reads as "no profile".
    """
    nb, na, ns = x.shape
    # per element along the last axis, per row along the middle one
    inner, outer = (per_channel, spatial) if channel_last else (spatial, per_channel)
    total = 0.0
    for b in range(nb):
        for a in range(na):
            row = 0.0
            for s in range(ns):
                e = abs(np.float64(x[b, a, s]) - ref[b, a, s])
                inner[s] += e
                row += e
            outer[a] += row
            total += row
    return total


KERNELS = (
    round_to_float32,
    row_medians,
    row_sums,
    sort_rows,
    sorted64,
    wasserstein_sums,
    error_profile,
)
"""The entry points :mod:`anpred.analysis.onepass` calls."""


def cached() -> bool:
    """Whether every kernel has an entry in numba's cache (compiled here before).

    Reads numba's cache bookkeeping (``_cache._cache_file._index_path``); should that
    change, answers True (the kernels still compile or load, only unannounced).
    """
    from anpred.analysis import compiled_outputs, compiled_reads

    try:
        return all(
            Path(k._cache._cache_file._index_path).exists()
            for k in (*KERNELS, *compiled_outputs.KERNELS, *compiled_reads.KERNELS)
        )
    except AttributeError:
        return True
