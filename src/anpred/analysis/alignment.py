"""Alignment: map a capture into the reference representation before any comparison.

A participant's capture of an anchor may differ from the reference capture in dtype
(float32, float16, int), layout (TensorFlow's NHWC), unit axes (a dropped batch axis),
flattening order, or, for independently written implementations, channel order.
:func:`align` undoes all of these and records every step it took, so a report can say
exactly what was done to a tensor before it was judged. When a capture cannot be mapped
unambiguously, :class:`AlignmentError` is raised: a capture is never compared silently
in the wrong order.

Rules, in order:

1. **dtype**: any real numeric dtype is cast to float64 (step ``cast float32->float64``);
   complex, object and string arrays are refused.
2. **layout**: when the capture's layout is recorded (``"NHWC"``), its axes are
   transposed to the reference layout (``"NCHW"`` by default: the recorded letters with
   ``C`` moved right after ``N``).
3. **shape**: the capture is then reshaped to the reference shape when that only drops
   or inserts unit axes (``squeeze batch``) or merges/splits consecutive axes in C order
   (``flatten order``). Any other reshape would reinterpret the data and is refused.
4. **unknown layout**: when no layout is recorded and step 3 does not fit, the axis
   orders that would make it fit are searched. One candidate is taken as it is; among
   several (an NHWC capture of a square feature map fits both NCHW and NCWH), the one
   closest to the reference values (:func:`~anpred.analysis.metrics.relative_l2`) is
   taken if it is clearly closer (:data:`AMBIGUITY_RATIO`), and otherwise the capture is
   refused (as is a nonzero capture against a zero reference: no order is closer).
5. **channel order**: a :class:`~anpred.analysis.channels.ChannelPermutation` (from
   :func:`~anpred.analysis.channels.infer_channel_permutation`) is applied last.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from anpred.analysis.channels import ChannelPermutation
from anpred.analysis.metrics import relative_l2
from anpred.errors import AnpredError

AMBIGUITY_RATIO = 4.0
"""Among several axis orders, the closest must be this many times closer than the next.

Equivalent implementations differ by fp32 noise (relative L2 ~1e-7 to 1e-5) while a wrong
axis order of a non-constant feature map is off by O(1): the ratio is orders of
magnitude, so 4 only refuses genuinely indistinguishable orders (e.g. symmetric maps)."""

MAX_AXIS_ORDERS = 720
"""Largest number of candidate axis orders searched (all orders of six axes)."""


class AlignmentError(AnpredError):
    """A capture cannot be mapped unambiguously into the reference representation."""


@dataclass(frozen=True)
class Aligned:
    """A capture in the reference representation.

    Attributes:
        values: C-contiguous float64 array of the reference shape (float32 where
            :func:`align` was asked to keep a float32 capture so).
        steps: What was done to the capture, in order (empty when nothing was needed).
    """

    values: np.ndarray
    steps: tuple[str, ...]


def default_reference_layout(layout: str) -> str:
    """Return the channels-first layout with the same letters (``"NHWC"`` -> ``"NCHW"``)."""
    rest = [axis for axis in layout if axis not in "NC"]
    head = [axis for axis in "NC" if axis in layout]
    return "".join(head + rest)


def _core(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(d) for d in shape if d != 1)


def _regroupable(source: Sequence[int], target: Sequence[int]) -> bool:
    """Whether ``source`` becomes ``target`` only by merging or splitting adjacent axes.

    Both shapes are walked in step; each group of axes with equal products must be a
    single axis on at least one side (a merge or a split). A group with several axes
    on both sides, like (2, 3) -> (3, 2), would reinterpret the data.
    """
    source, target = _core(source), _core(target)
    if math.prod(source) != math.prod(target):
        return False
    if math.prod(source) == 0:
        return source == target
    i = j = 0
    while i < len(source) and j < len(target):
        i0, j0 = i, j
        left, right = source[i], target[j]
        i, j = i + 1, j + 1
        while left != right:
            if left < right:
                left *= source[i]
                i += 1
            else:
                right *= target[j]
                j += 1
        if i - i0 > 1 and j - j0 > 1:
            return False
    return i == len(source) and j == len(target)


def _reshape_step(before: tuple[int, ...], after: tuple[int, ...]) -> str:
    if _core(before) == _core(after):
        if before == (1, *after):
            return "squeeze batch"
        if (1, *before) == after:
            return "add batch axis"
        return f"drop/insert unit axes {before}->{after}"
    return f"flatten order: reshape {before}->{after} in C order"


def _cast_steps(dtype: np.dtype) -> list[str]:
    """Check that ``dtype`` casts to float64 (bfloat16 from ml_dtypes does) and name the cast."""
    refused = dtype.kind in "OSUc"
    if not refused:
        try:
            np.zeros(0, dtype).astype(np.float64)
        except (TypeError, ValueError):
            refused = True
    if refused:
        raise AlignmentError(f"cannot compare a capture of dtype {dtype}")
    return [] if dtype == np.float64 else [f"cast {dtype}->float64"]


def _search_axis_orders(
    array: np.ndarray, reference_shape: tuple[int, ...], reference: np.ndarray | None
) -> tuple[np.ndarray, str]:
    """Find the axis order of a capture without a recorded layout (rule 4)."""
    if math.factorial(array.ndim) > MAX_AXIS_ORDERS:
        raise AlignmentError(
            f"capture shape {array.shape} does not fit reference shape {reference_shape} "
            "and has too many axes to search; record the layout"
        )
    fits: list[tuple[int, ...]] = []
    for order in itertools.permutations(range(array.ndim)):
        shape = tuple(array.shape[k] for k in order)
        if _regroupable(shape, reference_shape):
            # orders that differ only in where unit axes go are the same candidate
            key = tuple(k for k in order if array.shape[k] != 1)
            if key not in (tuple(k for k in f if array.shape[k] != 1) for f in fits):
                fits.append(order)
    if not fits:
        raise AlignmentError(
            f"capture shape {array.shape} cannot be mapped to reference shape "
            f"{reference_shape} by any axis order followed by a C-order reshape"
        )
    if len(fits) == 1:
        return array.transpose(fits[0]), f"transpose axes {fits[0]} inferred from shape"
    if reference is None:
        raise AlignmentError(
            f"capture shape {array.shape} fits reference shape {reference_shape} in "
            f"{len(fits)} axis orders and no layout is recorded; record the layout or "
            "pass the reference values"
        )
    reference = np.asarray(reference, dtype=np.float64)
    scored = sorted(
        (relative_l2(array.transpose(o).reshape(reference_shape).astype(np.float64), reference), o)
        for o in fits
    )
    (best, order), (second, _) = scored[0], scored[1]
    if math.isinf(best) and np.isfinite(array).all():  # relative L2's zero-reference rule
        raise AlignmentError(
            f"capture shape {array.shape} fits reference shape {reference_shape} in "
            f"{len(fits)} axis orders and the reference is zero, so its values cannot "
            "choose one; record the layout"
        )
    if second < AMBIGUITY_RATIO * best:
        raise AlignmentError(
            f"capture shape {array.shape}: axis orders {order} and {scored[1][1]} are about "
            f"equally close to the reference (relative L2 {best:.3g} vs {second:.3g}); "
            "record the layout"
        )
    step = (
        f"transpose axes {order} inferred from values "
        f"(relative L2 {best:.3g}, next order {second:.3g})"
    )
    return array.transpose(order), step


def align(
    array: np.ndarray,
    reference_shape: Sequence[int],
    layout: str | None = None,
    *,
    reference: np.ndarray | None = None,
    reference_layout: str | None = None,
    channel_permutation: ChannelPermutation | None = None,
    keep_float32: bool = False,
) -> Aligned:
    """Map a capture into the reference representation (see the module docstring).

    Args:
        array: The capture as the participant produced it.
        reference_shape: Shape of the reference capture of this anchor.
        layout: The capture's recorded layout (``"NHWC"``, ``"NCHW"``, ``"NWC"``...),
            or ``None`` when unknown.
        reference: Reference values, used to choose among several axis orders when the
            layout is unknown.
        reference_layout: Layout of the reference; by default the channels-first layout
            with the letters of ``layout``.
        channel_permutation: Channel order to restore, applied after layout and shape.
        keep_float32: Keep a float32 capture in float32 (the same values; the float64
            copy costs ~1 ms per million elements, which a caller that computes in
            float64 block by block need not pay). The steps still name the cast.

    Returns:
        The aligned float64 values and the steps taken.

    Raises:
        AlignmentError: When the capture cannot be mapped unambiguously.
    """
    array = np.asarray(array)
    reference_shape = tuple(int(d) for d in reference_shape)
    if reference is not None and tuple(reference.shape) != reference_shape:
        raise AlignmentError(
            f"reference values of shape {reference.shape} do not have the reference "
            f"shape {reference_shape}"
        )
    steps = _cast_steps(array.dtype)
    if layout is not None:
        layout = layout.upper()
        target = (reference_layout or default_reference_layout(layout)).upper()
        if len(set(layout)) != len(layout) or sorted(layout) != sorted(target):
            raise AlignmentError(f"layouts {layout} and {target} do not name the same axes")
        if len(layout) != array.ndim:
            raise AlignmentError(
                f"recorded layout {layout} does not fit a capture of shape {array.shape}"
            )
        if layout != target:
            array = array.transpose([layout.index(axis) for axis in target])
            steps.append(f"transpose {layout}->{target}")
    elif not _regroupable(array.shape, reference_shape):
        array, step = _search_axis_orders(array, reference_shape, reference)
        steps.append(step)
    if array.shape != reference_shape:
        if not _regroupable(array.shape, reference_shape):
            raise AlignmentError(
                f"capture shape {array.shape} (layout {layout}) cannot be reshaped to "
                f"reference shape {reference_shape} without reinterpreting the data"
            )
        steps.append(_reshape_step(array.shape, reference_shape))
        array = array.reshape(reference_shape)
    if channel_permutation is not None:
        array = channel_permutation.apply(array)
        if not channel_permutation.is_identity:
            steps.append(channel_permutation.step())
    dtype = np.float32 if keep_float32 and array.dtype == np.float32 else np.float64
    return Aligned(_contiguous(array, np.dtype(dtype)), tuple(steps))


def _contiguous(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``np.ascontiguousarray(array, dtype=dtype)``; a channels-last capture seen channels
    first (the transposed view of an NHWC capture) of that dtype is copied by the compiled
    loop when the analysis uses them and has loaded them (a copy never loads numba:
    :func:`anpred.analysis.compiled_reads.channels_first`, the same values, ~3x faster
    than NumPy's strided copy).
    """
    if array.flags.c_contiguous or array.dtype != dtype or array.ndim < 3 or array.size == 0:
        return np.ascontiguousarray(array, dtype=dtype)
    source = np.moveaxis(array, 1, -1)  # the channels-last array the view was made of
    from anpred.analysis import onepass

    loaded = "anpred.analysis.compiled" in sys.modules
    if not (source.flags.c_contiguous and loaded and onepass.kernels() is not None):
        return np.ascontiguousarray(array, dtype=dtype)
    from anpred.analysis import compiled_reads

    batch, channels = array.shape[:2]
    out = np.empty(array.shape, dtype)
    compiled_reads.channels_first(
        source.reshape(batch, -1, channels), out.reshape(batch, channels, -1)
    )
    return out
