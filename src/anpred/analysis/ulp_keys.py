"""Float32 ULP distances of blocks as unsigned keys: the one-pass kernel's ``max_ulp``.

:func:`anpred.analysis.metrics.max_ulp` maps float32 values to signed int32 keys whose
difference counts the float32 numbers between two values, and takes the largest
difference in int64. :class:`UlpKeys` computes the same keys into reused buffers, biased to
uint32, where the distance max(a, b) − min(a, b) is exact in 4 bytes per element.
"""

from __future__ import annotations

import numpy as np

KEY_BIAS = 0x7F800000
"""Added to the signed ULP keys of ``metrics._ordered_float32`` (range ±0x7f800000) to make
them unsigned (0 to 0xff000000 < 2**32), so that |a − b| = max(a, b) − min(a, b) is exact in
uint32: half the bytes of the int64 difference the generic ``max_ulp`` takes."""


class UlpKeys:
    """Biased unsigned float32 ULP keys of blocks, with reused buffers."""

    def __init__(self, size: int) -> None:
        self.sign, self.mask = np.empty(size, dtype=np.int32), np.empty(size, dtype=np.int32)
        self.high, self.low = np.empty(size, np.uint32), np.empty(size, np.uint32)

    def of(self, block: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Keys of ``block`` written into ``out`` (int32 buffer), returned as uint32.

        ``metrics._ordered_float32``'s mapping, (b ^ (s & 0x7fffffff)) − s with s = b >> 31,
        without its temporary, plus :data:`KEY_BIAS`.
        """
        n = block.size
        out, sign, mask = out[:n], self.sign[:n], self.mask[:n]
        out.view(np.float32)[:] = block  # rounds to float32
        np.right_shift(out, 31, out=sign)
        np.bitwise_and(sign, 0x7FFFFFFF, out=mask)
        np.bitwise_xor(out, mask, out=out)
        np.subtract(out, sign, out=out)
        keys = out.view(np.uint32)
        np.add(keys, np.uint32(KEY_BIAS), out=keys)  # wraps modulo 2**32 as intended
        return keys

    def largest_distance(self, a: np.ndarray, b: np.ndarray) -> int:
        """max_i |a_i − b_i| of two biased key blocks."""
        n = a.size
        high, low = self.high[:n], self.low[:n]
        np.maximum(a, b, out=high)
        np.minimum(a, b, out=low)
        np.subtract(high, low, out=high)
        return int(high.max())
