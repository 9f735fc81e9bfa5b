"""numpy definitions of the elementwise faults, on float32 bit patterns (no DL library)."""

from __future__ import annotations

import numpy as np

from anpred.inject.math import mantissa_mask


def bf16_reference(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16, nearest even (NaN stays NaN)."""
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, out)


def fp16_reference(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return x.astype(np.float16).astype(np.float32)


def truncate_reference(x: np.ndarray, bits: int) -> np.ndarray:
    return (x.view(np.int32) & np.int32(mantissa_mask(bits))).view(np.float32)
