"""Deviation metrics: how far a capture ``x`` lies from a comparison capture ``c``.

Every metric is registered by name with :func:`register_metric`; the oracle computes all
registered metrics for every (participant, anchor, input). Metrics take float64 arrays of
identical shape (aligned captures, see :mod:`anpred.analysis.alignment`) and return one
float; they hold nothing between calls, so the oracle can stream one (anchor, input) at a
time.

Two kinds of metric exist:

* **element-wise** metrics compare ``x`` and ``c`` element by element
  (``compare(x, c)``);
* **distributional** metrics need no element-wise matching: each array is first reduced
  to a *descriptor* (``describe(x)``: sorted values, per-channel moments, ...) and the
  metric compares descriptors (``compare(describe(x), describe(c))``). The oracle forms
  the consensus of a distributional metric as the element-wise median of the
  participants' descriptors.

Each metric declares its ``resolution``: the smallest value that can mean anything for
float32 execution (e.g. the float32 unit roundoff 2**-24 for relative metrics). The oracle
never treats a deviation below the resolution as a finding.

Conventions shared by all metrics: an empty array has deviation 0; a NaN anywhere in
``x`` or ``c`` yields NaN and infinities propagate (the oracle reports non-finite captures
separately), without floating-point warnings; a zero denominator yields 0 when the
numerator is 0 too and ``inf`` otherwise (for ``rel_l2``, a norm below :data:`ZERO_NORM`
counts as zero). Reductions run block by block (:data:`BLOCK`) so that no full-size
temporary is allocated per comparison.

:func:`relative_l2` is anpred's only relative L2 (the oracle's ``rel_l2``, stage isolation,
alignment), judged everywhere with one resolution, :data:`RELATIVE_L2_RESOLUTION`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

FLOAT32_UNIT_ROUNDOFF = 2.0**-24
"""u = 2**-24 ≈ 5.96e-8: the largest relative rounding error of one float32 operation."""

RELATIVE_L2_RESOLUTION = FLOAT32_UNIT_ROUNDOFF
"""Resolution of relative L2 (``rel_l2`` and stage isolation's introduced error).

One float32 rounding of every element moves ``x`` by at most u·||x||₂, so a relative L2
below u means nothing for float32 execution; the oracle's noise threshold is at least
``NOISE_FACTOR`` times this."""

ZERO_NORM = 2.0**-126
"""An L2 norm below this (the smallest normal float32, ≈ 1.18e-38) counts as zero.

Every element of a smaller reference is zero or subnormal in float32, which float32
execution cannot hold to full precision and libraries that flush subnormals to zero
(oneDNN, XLA on CPU) legitimately return as 0: a ratio against it would measure subnormal
handling, not precision. (Squares of elements below ~1e-154 underflow in float64; such
elements lie far below this bound, so the underflow cannot change what counts as zero.)"""

BLOCK = 1 << 16
"""Elements per block in block-wise reductions (512 KiB of float64, an L2-sized piece).

Whole-array temporaries (``x - c`` of a 1.6 M element anchor) are fresh allocations whose
page faults cost more than the arithmetic; reducing block by block with small reused
temporaries was measured 4-6x faster (relative L2 of 1.6 M elements: 3.8 ms vs 22 ms)."""

Describe = Callable[[np.ndarray], Any]
Compare = Callable[[Any, Any], float]


@dataclass(frozen=True)
class Metric:
    """A registered deviation metric.

    Attributes:
        name: Registry name, e.g. ``"rel_l2"``.
        compare: ``compare(x, c) -> float`` on values for element-wise metrics, on
            descriptors for distributional ones.
        describe: For a distributional metric, the function that reduces an array to its
            descriptor (a float64 ndarray whose shape depends only on the array's shape);
            the consensus descriptor is the element-wise median of the participants'.
            ``None`` for element-wise metrics.
        resolution: Smallest meaningful value of the metric in float32 execution.
        doc: First line of the metric's docstring.
    """

    name: str
    compare: Compare
    describe: Describe | None
    resolution: float
    doc: str

    @property
    def distributional(self) -> bool:
        """Whether the metric compares descriptors instead of elements."""
        return self.describe is not None

    def transform(self, a: np.ndarray) -> Any:
        """Return what ``compare`` takes for array ``a``: its descriptor, or ``a`` itself."""
        return a if self.describe is None else self.describe(a)

    def __call__(self, x: np.ndarray, c: np.ndarray) -> float:
        """Return the metric of capture ``x`` against comparison ``c`` (arrays of one shape)."""
        if x.shape != c.shape:
            raise ValueError(f"metric {self.name}: shapes differ, {x.shape} vs {c.shape}")
        return self.compare(self.transform(x), self.transform(c))


_METRICS: dict[str, Metric] = {}


def _quiet(function: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``function`` without floating-point warnings.

    Inside a metric, NaN and inf are results (they propagate and the oracle reports
    non-finite captures itself), not accidents worth a warning: inf − inf, overflow of
    a huge value cast to float32, 0/0 in a descriptor.
    """

    @functools.wraps(function)
    def quiet(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            return function(*args)

    return quiet


def register_metric(
    name: str,
    *,
    describe: Describe | None = None,
    resolution: float = 0.0,
) -> Callable[[Compare], Compare]:
    """Register a deviation metric under ``name``.

    Args:
        name: Registry name.
        describe: For a distributional metric, the descriptor function.
        resolution: Smallest meaningful value (see module docstring).

    Returns:
        A decorator that registers ``compare`` and returns it unchanged.

    Raises:
        ValueError: When ``name`` is registered already.
    """

    def decorator(compare: Compare) -> Compare:
        if name in _METRICS:
            raise ValueError(f"metric '{name}' is registered twice")
        doc = (compare.__doc__ or name).strip().splitlines()[0]
        quiet_describe = None if describe is None else _quiet(describe)
        _METRICS[name] = Metric(name, _quiet(compare), quiet_describe, float(resolution), doc)
        return compare

    return decorator


def get_metric(name: str) -> Metric:
    """Return the metric registered as ``name``.

    Raises:
        KeyError: With the list of known metrics when ``name`` is not registered.
    """
    try:
        return _METRICS[name]
    except KeyError:
        raise KeyError(f"no metric '{name}'; registered: {sorted(_METRICS)}") from None


def metric_names() -> tuple[str, ...]:
    """Names of all registered metrics, in registration order."""
    return tuple(_METRICS)


def compute_metrics(
    x: np.ndarray, c: np.ndarray, names: Iterable[str] | None = None
) -> dict[str, float]:
    """Compute several metrics of ``x`` against ``c``.

    Args:
        x: Capture (float64).
        c: Comparison capture of the same shape.
        names: Metrics to compute; all registered metrics when ``None``.

    Returns:
        ``{metric name: value}``.
    """
    return {n: get_metric(n)(x, c) for n in (metric_names() if names is None else names)}


def _ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator`` with 0/0 = 0 and x/0 = inf (NaN propagates)."""
    if math.isnan(numerator) or math.isnan(denominator):
        return math.nan
    if denominator == 0.0:
        return 0.0 if numerator == 0.0 else math.inf
    return numerator / denominator


def _blocks(*arrays: np.ndarray) -> Iterator[tuple[np.ndarray, ...]]:
    """Yield aligned flat blocks of :data:`BLOCK` elements of equally sized arrays."""
    flats = [a.reshape(-1) for a in arrays]
    for start in range(0, flats[0].size, BLOCK):
        yield tuple(f[start : start + BLOCK] for f in flats)


def _sum_of_squares(a: np.ndarray) -> float:
    return float(np.einsum("i,i->", a, a))


def l2_norm(a: np.ndarray) -> float:
    """Euclidean norm of all elements, block by block.

    ``np.einsum`` rather than ``np.linalg.norm``: the latter calls BLAS ``dot``, whose
    thread start-up costs ~1 ms per call on a loaded multi-core machine (measured: 1.3 ms
    vs 9 µs for 18k elements with two OpenBLAS threads), which dominates small anchors.
    """
    return math.sqrt(sum(_sum_of_squares(b) for (b,) in _blocks(a)))


def _max_of(values: Iterable[float]) -> float:
    """Largest value; NaN if any value is NaN (Python's ``max`` would drop it)."""
    largest = 0.0
    for value in values:
        if math.isnan(value):
            return math.nan
        largest = max(largest, value)
    return largest


@register_metric("rel_l2", resolution=RELATIVE_L2_RESOLUTION)
def relative_l2(x: np.ndarray, c: np.ndarray) -> float:
    """Relative L2 error ||x − c||₂ / ||c||₂, the one relative L2 of anpred.

    The magnitude metric: scale-free, so comparable across anchors, and it aggregates
    every element, so a small systematic error over many elements counts.

    Rules: a **zero reference** (||c||₂ < :data:`ZERO_NORM`) has no scale to be
    relative to, so the result is 0 when ||x − c||₂ < :data:`ZERO_NORM` too (both zero
    for float32) and ``inf`` otherwise (any real difference from zero is infinitely
    large relative to it; the oracle's population treats ``inf`` like any large value).
    **Non-finite** values: a NaN in ``x`` or ``c`` gives NaN, an inf in ``x`` (``c``
    finite) gives ``inf``, an inf in ``c`` gives NaN. Empty arrays give 0.

    Args:
        x: Values to judge (any real dtype; differences are taken in float64).
        c: Comparison values (float64), of the shape of ``x``.

    Raises:
        ValueError: When the shapes differ.
    """
    if x.shape != c.shape:
        raise ValueError(f"rel_l2: shapes differ, {x.shape} vs {c.shape}")
    difference = reference = 0.0
    with np.errstate(all="ignore"):  # quiet when called directly, as the registry's is
        for xb, cb in _blocks(x, c):
            difference += _sum_of_squares(xb - cb)
            reference += _sum_of_squares(cb)
    return _relative_l2_rule(difference, reference)


def _relative_l2_rule(difference_sq: float, reference_sq: float) -> float:
    """:func:`relative_l2` from the two sums of squares (its NaN and zero-reference rules)."""
    difference, reference = math.sqrt(difference_sq), math.sqrt(reference_sq)
    if math.isnan(difference) or math.isnan(reference):
        return math.nan
    if reference < ZERO_NORM:
        return 0.0 if difference < ZERO_NORM else math.inf
    return difference / reference


def block_sum_of_squares(c: np.ndarray) -> float:
    """``c``'s sum of squares, block by block as :func:`relative_l2` sums its reference."""
    reference = 0.0
    with np.errstate(all="ignore"):
        for (cb,) in _blocks(c):
            reference += _sum_of_squares(cb)
    return reference


def relative_l2_given(x: np.ndarray, c: np.ndarray, reference_sq: float) -> float:
    """:func:`relative_l2` with ``c``'s sum of squares given (:func:`block_sum_of_squares`):
    bit for bit the same number, for several ``x`` against one ``c`` (stage isolation: every
    participant against the fp64 reference, where the reference's sum took half the time).

    Raises:
        ValueError: When the shapes differ.
    """
    if x.shape != c.shape:
        raise ValueError(f"rel_l2: shapes differ, {x.shape} vs {c.shape}")
    difference = 0.0
    loops = _difference_loops(x, c)
    with np.errstate(all="ignore"):
        if loops is None:
            for xb, cb in _blocks(x, c):
                difference += _sum_of_squares(xb - cb)
        else:  # x − c by the compiled loop into one buffer: the same values, ~30% faster
            buffer = np.empty(min(BLOCK, x.size))
            for xb, cb in _blocks(x, c):
                d = buffer[: xb.size]
                loops.difference(xb, cb, d)
                difference += _sum_of_squares(d)
    return _relative_l2_rule(difference, reference_sq)


def _difference_loops(x: np.ndarray, c: np.ndarray) -> Any:
    """:mod:`anpred.analysis.compiled_reads` when the analysis uses the compiled loops and
    they take ``x`` (C-contiguous float32 or float64) and ``c`` (C-contiguous float64).
    """
    if not (
        x.size
        and x.dtype in (np.float32, np.float64)
        and c.dtype == np.float64
        and x.flags.c_contiguous
        and c.flags.c_contiguous
    ):
        return None
    from anpred.analysis import onepass

    if onepass.kernels() is None:
        return None
    from anpred.analysis import compiled_reads

    return compiled_reads


@register_metric("max_abs")
def max_abs(x: np.ndarray, c: np.ndarray) -> float:
    """Largest absolute difference max_i |x_i − c_i| (in the anchor's own units)."""
    return _max_of(float(np.max(np.abs(xb - cb))) for xb, cb in _blocks(x, c) if xb.size)


def _ordered_float32(block: np.ndarray, out: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """Round to float32 and map to int32 so that adjacent floats differ by exactly 1.

    Positive floats keep their bit pattern b; negative ones map to −2³¹ − b (−0.0 and
    +0.0 both to 0), the standard trick for ULP distances, computed branch-free as
    (b ^ (s & 0x7fffffff)) − s with s = b >> 31 (numpy's masked ``where=`` is ~10x
    slower). The mapped range [−0x7f800000, 0x7f800000] fits int32. Writes into ``out``
    (int32, the block's size; ``sign`` is scratch of the same size) and returns it.
    """
    out.view(np.float32)[:] = block  # rounds to float32
    np.right_shift(out, 31, out=sign)
    np.bitwise_xor(out, np.bitwise_and(sign, 0x7FFFFFFF), out=out)
    np.subtract(out, sign, out=out)
    return out


@register_metric("max_ulp", resolution=1.0)
def max_ulp(x: np.ndarray, c: np.ndarray) -> float:
    """Largest distance in float32 units in the last place, max_i ULP32(x_i, c_i).

    Both arrays are rounded to float32 first; ULP32(a, b) counts the float32 numbers
    between a and b (0 when they round to the same float32; ±0 count as equal; ±inf
    are the neighbours of the largest finite floats). An extreme metric that is
    independent of the anchor's scale but large for values near zero.
    """
    if x.size == 0:
        return 0.0
    ox, oc, sign = (np.empty(min(x.size, BLOCK), dtype=np.int32) for _ in range(3))
    largest = 0
    for xb, cb in _blocks(x, c):
        if np.isnan(xb).any() or np.isnan(cb).any():
            return math.nan
        n = xb.size
        difference = np.subtract(
            _ordered_float32(xb, ox[:n], sign[:n]),
            _ordered_float32(cb, oc[:n], sign[:n]),
            dtype=np.int64,
        )
        largest = max(largest, int(np.max(np.abs(difference))))
    return float(largest)


@register_metric("cosine", resolution=FLOAT32_UNIT_ROUNDOFF**2)
def cosine_distance(x: np.ndarray, c: np.ndarray) -> float:
    """Cosine distance 1 − ⟨x, c⟩ / (||x|| ||c||), computed as ½ ||x/||x|| − c/||c||||².

    The direction metric, blind to a common scale factor. The half squared distance of
    the unit vectors is algebraically equal to 1 − cos but does not cancel
    catastrophically for nearly parallel vectors (1 − cos ≈ θ²/2 is far below float64
    resolution of cos itself when θ ~ 1e-7). Both zero: 0; exactly one zero: 1.
    """
    nx, nc = l2_norm(x), l2_norm(c)
    if math.isnan(nx) or math.isnan(nc):
        return math.nan
    if nx == 0.0 or nc == 0.0:
        return 0.0 if nx == nc else 1.0
    squares = sum(_sum_of_squares(xb / nx - cb / nc) for xb, cb in _blocks(x, c))
    return 0.5 * squares


def sorted_values(a: np.ndarray) -> np.ndarray:
    """Descriptor of the value distribution: all values, flattened and sorted ascending.

    For arrays of equal size the sorted values are the empirical quantile function at
    the same plotting positions, and the element-wise median of several such
    descriptors is again a valid (non-decreasing) quantile function.
    """
    flat = np.asarray(a, dtype=np.float64).reshape(-1)
    narrow = flat.astype(np.float32)
    if np.array_equal(narrow, flat):  # float32 captures: sorting float32 is ~2x faster
        narrow.sort()
        return narrow.astype(np.float64)
    return np.sort(flat)


def _quantile_sorted(s: np.ndarray, q: float) -> float:
    """Quantile of sorted data with numpy's default linear interpolation."""
    position = q * (s.size - 1)
    lo = int(math.floor(position))
    hi = min(lo + 1, s.size - 1)
    return float(s[lo] + (s[hi] - s[lo]) * (position - lo))


def _spread_sorted(s: np.ndarray) -> float:
    """Robust spread of sorted data: the IQR, or the std when the IQR is 0."""
    iqr = _quantile_sorted(s, 0.75) - _quantile_sorted(s, 0.25)
    return iqr if iqr > 0.0 else float(np.std(s))


@register_metric("wasserstein", describe=sorted_values, resolution=FLOAT32_UNIT_ROUNDOFF)
def wasserstein(sx: np.ndarray, sc: np.ndarray) -> float:
    """Wasserstein-1 distance of the value distributions over the spread of c.

    W1(x, c) / spread(c) with W1 = (1/n) Σ_i |x_(i) − c_(i)| on the sorted values
    (exact for two empirical distributions of n atoms each) and spread(c) the
    interquartile range of c (its standard deviation when the IQR is 0, as for a
    tensor that is mostly zeros). Needs no element-wise matching: insensitive to
    permutations of elements, sensitive to shifts, scalings and changed tails.
    """
    if sx.shape != sc.shape:
        raise ValueError(f"wasserstein: descriptors differ in size, {sx.size} vs {sc.size}")
    if sx.size == 0:
        return 0.0
    if np.isnan(sx[-1]) or np.isnan(sc[-1]):  # np.sort puts NaN last
        return math.nan
    total = sum(float(np.sum(np.abs(xb - cb))) for xb, cb in _blocks(sx, sc))
    return _ratio(total / sx.size, _spread_sorted(sc))


def float32_or_float64(a: np.ndarray) -> np.ndarray:
    """``a`` as it is when float32, else as float64: the float64 values either way, without
    a float64 copy of float32 data (for code that converts as it reads).
    """
    a = np.asarray(a)
    return a if a.dtype == np.float32 else np.asarray(a, dtype=np.float64)


def channel_moments(a: np.ndarray) -> np.ndarray:
    """Descriptor of per-channel moments: ``[[mean_k], [std_k]]`` over channels k (axis 1).

    Axis 1 is the channel axis of the reference representation (NCHW, NCL, (N, C, A));
    an array of rank < 2 is one channel. The std is the population std, computed in two
    passes (mean, then mean squared deviation) to avoid the cancellation of
    E[x²] − E[x]².

    A float32 array is read as its float64 values a block of channels at a time (the
    same numbers as for its float64 copy, without the copy).
    """
    a = float32_or_float64(a)
    if a.ndim < 2:
        per_channel = a.reshape(1, -1)
    else:
        rest = math.prod(a.shape[2:])
        per_channel = np.swapaxes(a.reshape(a.shape[0], a.shape[1], rest), 0, 1)
        per_channel = per_channel.reshape(a.shape[1], a.shape[0] * rest)
    if per_channel.shape[1] == 0:
        return np.zeros((2, per_channel.shape[0]))
    channels, count = per_channel.shape
    narrow = per_channel.dtype == np.float32
    mean = np.empty(channels) if narrow else per_channel.mean(axis=1)
    squares = np.empty(channels)
    rows = max(1, BLOCK // count)  # channels per block
    buffer = np.empty((min(rows, channels), count))  # reused: no allocation per block
    for start in range(0, channels, rows):
        block = per_channel[start : start + rows]
        if narrow:  # the block's float64 values, then each row's mean as NumPy sums a row
            block = buffer[: len(block)]
            block[:] = per_channel[start : start + rows]
            mean[start : start + rows] = block.mean(axis=1)
        centred = np.subtract(block, mean[start : start + rows, None], out=buffer[: len(block)])
        squares[start : start + rows] = np.einsum("ij,ij->i", centred, centred)
    return np.stack([mean, np.sqrt(squares / count)])


@register_metric("channel_moments", describe=channel_moments, resolution=FLOAT32_UNIT_ROUNDOFF)
def channel_moment_difference(mx: np.ndarray, mc: np.ndarray) -> float:
    """Largest per-channel moment difference over the RMS of c.

    max_k max(|μx_k − μc_k|, |σx_k − σc_k|) / rms(c), with μ, σ the mean and std of
    channel k (axis 1) and rms(c)² = mean_k(μc_k² + σc_k²) = mean(c²). The maximum over
    channels keeps an error confined to a few channels visible (dimension sensitivity);
    normalising by the RMS puts it on the scale of ``rel_l2``.
    """
    if mx.shape != mc.shape:
        raise ValueError(f"channel_moments: descriptors differ, {mx.shape} vs {mc.shape}")
    if mx.size == 0:
        return 0.0
    if np.isnan(mx).any() or np.isnan(mc).any():
        return math.nan
    rms = math.sqrt(float(np.mean(mc[0] ** 2 + mc[1] ** 2)))
    return _ratio(float(np.max(np.abs(mx - mc))), rms)


def resolutions(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Return the declared resolution of every registered metric, with ``overrides`` applied."""
    table = {name: metric.resolution for name, metric in _METRICS.items()}
    table.update(overrides or {})
    return table
