"""numpy definitions of the elementwise faults, on float32 bit patterns, and of the fault
chain's s2 Conv (no DL library).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from fault_chain import weights

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


def s2_conv_reference(s1: np.ndarray, rounding: Any) -> np.ndarray:
    """The chain's s2 = Conv(s1, w2) + b2 in float64, on operands passed through ``rounding``."""
    w = weights()
    x = np.pad(rounding(s1).astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    kernel = rounding(w["w2"]).astype(np.float64)
    height, width = s1.shape[2:]
    out = sum(
        np.einsum("nchw,oc->nohw", x[:, :, i : i + height, j : j + width], kernel[:, :, i, j])
        for i in range(3)
        for j in range(3)
    )
    return out + w["b2"].astype(np.float64)[None, :, None, None]
