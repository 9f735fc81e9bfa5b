"""Compiled loops that read captures for the analysis pass (numba): copies and checks that
NumPy makes in several passes, or through its slow strided copy, in one loop each.

* :func:`channels_first`: a channels-last capture (TensorFlow's NHWC) copied into the
  reference's channels-first layout, a tile of positions at a time (NumPy's copy of the
  transposed view reads across a whole row of channels per element written: 8.3 ms for
  yolov8n's eight NHWC anchors of one input, 2.4 ms here);
* :func:`all_finite`, :func:`copy_finite`: whether every value is finite (and a copy),
  without the boolean array ``np.isfinite(x).all()`` forms;
* :func:`difference`: ``x − c`` into a buffer, ``x`` float32 or float64 (NumPy casts a
  float32 operand through its buffered iterator): the introduced errors
  (:func:`anpred.analysis.metrics.relative_l2_given`) ~30% faster.

Measured on a yolov8n run (8 inputs, six libraries; CPU per input, this code and the one
before alternating): alignment 0.025 -> 0.013 s, introduced errors 0.052 -> 0.039 s, the
oracle's phase 1 (with its finiteness checks) 0.100 -> 0.085 s.

Every value is exactly what the NumPy expression gives: copies, comparisons, and one
IEEE subtraction of float64 values (no ``fastmath``). Used when the analysis uses the
compiled loops (:func:`anpred.analysis.onepass.kernels`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

TILE = 64
"""Positions per tile of :func:`channels_first`: a tile of every channel's values (64 ×
256 channels × 8 bytes at most on yolov8n) stays in L2 while its channels are written."""


@njit(cache=True, nogil=True, error_model="numpy")
def channels_first(x: np.ndarray, out: np.ndarray) -> None:
    """Copy ``x`` (B × P × C, channels last) into ``out`` (B × C × P): ``out[b, c, p] =
    x[b, p, c]``.
    """
    batch, positions, channels = x.shape
    for b in range(batch):
        for start in range(0, positions, TILE):
            stop = min(positions, start + TILE)
            for c in range(channels):
                for p in range(start, stop):
                    out[b, c, p] = x[b, p, c]


@njit(cache=True, nogil=True, error_model="numpy")
def all_finite(x: np.ndarray) -> bool:
    """Whether every value of flat ``x`` (float32 or float64) is finite (``v − v`` is 0
    exactly for a finite value, NaN for NaN and inf).
    """
    finite = True
    for i in range(x.size):
        v = x[i]
        finite &= v - v == 0.0
    return finite


@njit(cache=True, nogil=True, error_model="numpy")
def copy_finite(x: np.ndarray, out: np.ndarray) -> bool:
    """Copy flat ``x`` into ``out`` (of its dtype); return whether every value is finite."""
    finite = True
    for i in range(x.size):
        v = x[i]
        out[i] = v
        finite &= v - v == 0.0
    return finite


@njit(cache=True, nogil=True, error_model="numpy")
def difference(x: np.ndarray, c: np.ndarray, out: np.ndarray) -> None:
    """``out = x − c`` of flat arrays (``c`` and ``out`` float64): NumPy's ``x − c``."""
    for i in range(x.size):
        out[i] = np.float64(x[i]) - c[i]


KERNELS = (channels_first, all_finite, copy_finite, difference)
"""The entry points the analysis calls."""


def warm() -> None:
    """Load (or compile) every entry point, on tiny arrays of the types the pass uses:
    captures float32 or float64, references float64.
    """
    wide = np.arange(6.0)
    for x in (wide, wide.astype(np.float32)):
        channels_first(x.reshape(1, 3, 2), np.empty((1, 2, 3), x.dtype))
        all_finite(x)
        copy_finite(x, np.empty_like(x))
        difference(x, wide, np.empty(6))
