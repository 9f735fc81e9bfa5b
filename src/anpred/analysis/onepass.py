"""Every built-in metric of one anchor in one blocked pass: the oracle's phase 1 kernel.

:func:`measure_anchor` returns what :func:`anpred.analysis.oracle.assess` needs from one
(anchor, input): every participant's metrics against the consensus and against the fp64
reference, and the consensus's against the fp64 reference. The generic way (each metric
on its own, see :mod:`anpred.analysis.metrics`) reads every array once per metric and
pair (13 pairs × 4 element-wise metrics for six participants) and converts and sorts in
float64; this module computes the same numbers with far fewer passes:

* the element-wise metrics (``rel_l2``, ``max_abs``, ``max_ulp``, ``cosine``) of all
  pairs are reduced together, block by block (:data:`BLOCK`), while a block of the
  consensus and the fp64 reference is in cache: the difference ``x − c`` is formed once
  for ``rel_l2`` and ``max_abs``, ``c/||c||`` and the float32 ULP keys of ``c`` once per
  block for all participants;
* captures that hold float32 values (every fp32 library's) are sorted as float32 (exact:
  the same values, ~2x faster than float64; on the compiled path by a radix sort,
  :func:`anpred.analysis.compiled.sort_rows`, ~5x faster than ``np.sort`` on yolov8n's
  captures, which made the kernel 2.7x faster there), and the consensus of sorted descriptors and
  of values is formed with float32 compare-exchanges where the inputs are float32
  (:func:`anpred.analysis.consensus.elementwise_median` does the same for any input).

**Same numbers.** Every formula is the generic one, element by element (the same
divisions, differences and float32 roundings) and blocks of the same size
(:data:`anpred.analysis.metrics.BLOCK`), so sums are added in the same order: on the
benchmark's anchors every number is bitwise the generic path's. Only summation order
inside NumPy may differ, so tests/analysis/test_onepass.py allows 1e-12 relative for sums
and demands maxima and channel moments exactly. Norms are summed exactly as
:func:`~anpred.analysis.metrics.l2_norm` sums them: cosine distance amplifies a one-ulp
change of a norm to ~1e-9 relative.

**Two paths.** Where every capture holds float32 values, the loops of
:mod:`anpred.analysis.compiled` (numba) do the above element by element, each capture read
once per pass (their sums differ from this module's NumPy blocks by a few float64 roundings,
~1e-15 relative; the tests run every case on both paths). Other captures, small runs
(:func:`use_compiled`), a missing numba or ``ANPRED_NO_JIT=1`` take the NumPy blocks below.

Arrays with a NaN or inf (their sum of squares is not finite), empty arrays and metrics
this module does not know take the generic path, so every convention of
:mod:`anpred.analysis.metrics` holds unchanged.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from anpred.analysis import sorted_cache
from anpred.analysis.consensus import (
    MedianNetwork,
    elementwise_median,
    sorting_network,
    work_dtype,
)
from anpred.analysis.metrics import BLOCK as metrics_block
from anpred.analysis.metrics import (
    ZERO_NORM,
    Metric,
    _ratio,
    _spread_sorted,
    block_sum_of_squares,
    channel_moment_difference,
    channel_moments,
    get_metric,
    l2_norm,
)
from anpred.analysis.ulp_keys import UlpKeys

ELEMENTWISE = ("rel_l2", "max_abs", "max_ulp", "cosine")
"""Element-wise metrics this module computes itself."""

FUSED = frozenset((*ELEMENTWISE, "wasserstein", "channel_moments"))
"""Every metric this module computes itself; others take the generic path."""

BLOCK = metrics_block
"""Elements per block of the fused loops: :data:`anpred.analysis.metrics.BLOCK` (2**16).

The same blocks as the generic metrics, so that block sums are added in the same order.
Measured on the benchmark's anchors (element-wise loop, six participants): 2**16 took
120 ms, 2**15 126 ms, 2**14 136 ms: with ~20 NumPy calls per participant and block the
per-call overhead outweighs keeping every operand in L2. ``np.dot`` instead of
``np.einsum`` is 3x faster per call but starts OpenBLAS threads above 10,000 elements,
which took 5x longer on a loaded 2-core machine; einsum it is."""


@dataclass(frozen=True)
class AnchorMetrics:
    """Phase 1 numbers of one (anchor, input).

    Attributes:
        vs_consensus: ``{participant: {metric: value}}`` against the consensus.
        vs_fp64: ``{participant: {metric: value}}`` against the fp64 reference.
        consensus_vs_fp64: ``{metric: value}`` of the consensus against fp64.
    """

    vs_consensus: dict[str, dict[str, float]]
    vs_fp64: dict[str, dict[str, float]]
    consensus_vs_fp64: dict[str, float]


More = Callable[["AnchorMetrics"], Sequence[Metric]]
"""``measure_anchor``'s ``more``: given the numbers of the metrics asked for, the metrics to
compute besides (none: an empty sequence)."""


def measure_anchor(
    metrics: Sequence[Metric],
    arrays: Mapping[str, np.ndarray],
    fp64: np.ndarray,
    more: More | None = None,
    sort_keys: Mapping[str | None, Hashable] | None = None,
) -> AnchorMetrics:
    """Every metric of every participant against the consensus and the fp64 reference.

    Args:
        metrics: Metrics to compute (registered :class:`~anpred.analysis.metrics.Metric`).
        arrays: ``{participant: capture}``, all of ``fp64``'s shape; at least one. Each
            float64, or float32 (read as its float64 values: the same numbers; the compiled
            loops then need no float64 copy to round back).
        fp64: The fp64 reference (float64).
        more: Called with the numbers of ``metrics``; the metrics it returns are computed
            too, on the same float32 roundings and consensus (the oracle's verdict path:
            the corroborating metrics where it has a candidate, without a second pass for
            the primary). The numbers are those of one call with every metric.
        sort_keys: Per participant (``None``: the fp64 reference), the key its sorted
            values are kept under across calls while :func:`anpred.analysis.sorted_cache.kept`
            (the same key: the same values).

    Returns:
        The numbers, as the generic per-metric computation gives them (see module doc).
    """
    names = [m.name for m in metrics]
    if fp64.size == 0 or not any(n in FUSED for n in names):
        return measure_generic(metrics, _wide(arrays), fp64, more)
    vs_c: dict[str, dict[str, float]] = {p: {} for p in arrays}
    vs_f: dict[str, dict[str, float]] = {p: {} for p in arrays}
    c_vs_f: dict[str, float] = {}
    loops = kernels()
    with np.errstate(all="ignore"):  # float32 overflow of huge values is a result here
        state = None if loops is None else _compiled(loops, arrays, fp64)
        if state is _GENERIC:
            return measure_generic(metrics, _wide(arrays), fp64, more)
        if state is None:  # not compiled, or a capture that is not float32-exact
            arrays = _wide(arrays)
            first = _first_pass(arrays, fp64)
            if first is None:  # a NaN or inf somewhere: the generic path's conventions
                return measure_generic(metrics, arrays, fp64, more)
            consensus = first[3]

            def compute(chosen: Sequence[str]) -> None:
                _fused(chosen, arrays, fp64, first, vs_c, vs_f, c_vs_f)

        else:
            consensus = state.consensus.reshape(fp64.shape)
            if sort_keys:
                state.sort_keys = [sort_keys.get(p) for p in [*arrays, None]]

            def compute(chosen: Sequence[str]) -> None:
                state.metrics(chosen, arrays, vs_c, vs_f, c_vs_f)

        result = _measured(metrics, arrays, fp64, consensus, compute, vs_c, vs_f, c_vs_f)
        extra = [m for m in (more(result) if more else ()) if m.name not in names]
        if extra:
            return _measured(
                [*metrics, *extra], arrays, fp64, consensus, compute, vs_c, vs_f, c_vs_f,
                done=names,
            )  # fmt: skip
    return result


def _measured(
    metrics: Sequence[Metric],
    arrays: Mapping[str, np.ndarray],
    fp64: np.ndarray,
    consensus: np.ndarray,
    compute: Callable[[Sequence[str]], None],
    vs_c: dict[str, dict[str, float]],
    vs_f: dict[str, dict[str, float]],
    c_vs_f: dict[str, float],
    done: Sequence[str] = (),
) -> AnchorMetrics:
    """``metrics`` (but those ``done`` already) written into the three tables: the built-in
    ones by ``compute``, the others by the generic path against ``consensus``; the tables
    in the order of ``metrics``.
    """
    names = [m.name for m in metrics]
    compute([n for n in names if n not in done])
    others = [m for m in metrics if m.name not in FUSED and m.name not in done]
    if others:
        rest = _generic(others, _wide(arrays), fp64, consensus)
        for p in arrays:
            vs_c[p].update(rest.vs_consensus[p])
            vs_f[p].update(rest.vs_fp64[p])
        c_vs_f.update(rest.consensus_vs_fp64)
    order = {p: {n: vs_c[p][n] for n in names} for p in arrays}
    order_f = {p: {n: vs_f[p][n] for n in names} for p in arrays}
    return AnchorMetrics(order, order_f, {n: c_vs_f[n] for n in names})


def _fused(
    names: Sequence[str],
    arrays: Mapping[str, np.ndarray],
    fp64: np.ndarray,
    first: _FirstPass,
    vs_c: dict[str, dict[str, float]],
    vs_f: dict[str, dict[str, float]],
    c_vs_f: dict[str, float],
) -> None:
    """The built-in metrics among ``names``, written into the three tables."""
    narrow, exact, norms, consensus, reference_squares = first
    chosen = [n for n in ELEMENTWISE if n in names]
    if chosen:
        _elementwise(
            chosen, arrays, narrow, norms, consensus, reference_squares, fp64, vs_c, vs_f, c_vs_f
        )
    if "wasserstein" in names:  # last user of ``narrow``: sorts it in place
        _wasserstein(arrays, narrow, exact, fp64, vs_c, vs_f, c_vs_f)
    if "channel_moments" in names:
        _distributional(
            "channel_moments", channel_moments, channel_moment_difference,
            arrays, fp64, vs_c, vs_f, c_vs_f,
        )  # fmt: skip


_GENERIC: Any = object()
"""What :func:`_compiled` returns for captures with a NaN or inf: the generic path's case."""


_compiled_wanted = True
"""Whether this process may use the compiled loops (:func:`use_compiled`)."""


def use_compiled(wanted: bool) -> bool:
    """Let :func:`measure_anchor` use the compiled loops in this process, or not.

    Loading them costs a process ~0.9 s (numba's import and the cached code), which a pass
    over little data does not earn back (:data:`anpred.pipeline.collect_pool.COMPILED_MIN_BYTES`).

    Returns:
        The previous setting (to restore it).
    """
    global _compiled_wanted
    previous, _compiled_wanted = _compiled_wanted, wanted
    return previous


def kernels() -> Any:
    """:mod:`anpred.analysis.compiled`, or ``None`` without numba, with ``ANPRED_NO_JIT`` or
    after ``use_compiled(False)``.
    """
    if not _compiled_wanted or os.environ.get("ANPRED_NO_JIT"):
        return None
    try:
        from anpred.analysis import compiled
    except Exception:  # noqa: BLE001 - numba missing or unusable (no cache folder it may
        return None  # write, ...): the NumPy path gives the same numbers
    return compiled


COMPILE_SECONDS = 15
"""About how long compiling the loops takes (12.3 s measured on a 2-core Xeon at 2.8 GHz)."""


def prepare(say: Callable[[str], None]) -> None:
    """Compile the loops in this process when numba's cache does not hold them yet.

    Processes started afterwards (the analysis pool) then load them from the cache
    instead of each compiling them. Says so when it compiles (once per machine and
    version of :mod:`anpred.analysis.compiled`).
    """
    loops = kernels()
    if loops is None or loops.cached():
        return  # loaded where they are first used
    say(f"  compiling the analysis kernels (once per machine, about {COMPILE_SECONDS} s)")
    warm()


def warm() -> None:
    """Load the compiled loops into this process now (compiling what numba's cache lacks):
    each entry point once, on tiny arrays of the types the analysis passes them.
    """
    loops = kernels()
    if loops is None:
        return
    values = np.arange(8.0).reshape(1, 2, 4)
    narrow = values.astype(np.float32)  # captures come float32 (pipeline) or float64
    names = (*ELEMENTWISE, "wasserstein", "channel_moments")
    measure_anchor([get_metric(n) for n in names], {"a": values, "b": narrow}, values)
    for x in (values, narrow):  # the dimension records
        loops.error_profile(x, values, False, np.zeros(2), np.zeros(4))
    from anpred.analysis import compiled_outputs, compiled_reads

    compiled_outputs.warm()  # the output-level baselines
    compiled_reads.warm()  # alignment's copies, finiteness, introduced errors


@dataclass
class _CompiledPass:
    """What the compiled loops' metrics of one anchor share: the captures' float32 values
    (one row each), their consensus and the fp64 reference; :meth:`metrics` computes any
    built-in metrics on them, as often as asked.
    """

    loops: Any
    narrow: np.ndarray
    consensus: np.ndarray
    network: np.ndarray
    ref_squares: tuple[float, float]
    fp64: np.ndarray
    fp64_flat: np.ndarray
    sorted_rows: bool = False
    #: Per row, then the fp64 reference: the key its sorted values are kept under across
    #: passes (:mod:`anpred.analysis.sorted_cache`; ``None``: sorted here).
    sort_keys: Sequence[Hashable | None] = ()

    def metrics(
        self,
        names: Sequence[str],
        arrays: Mapping[str, np.ndarray],
        vs_c: dict[str, dict[str, float]],
        vs_f: dict[str, dict[str, float]],
        c_vs_f: dict[str, float],
    ) -> None:
        """The built-in metrics among ``names``, written into the tables."""
        chosen = [n for n in ELEMENTWISE if n in names]
        if chosen:
            if self.sorted_rows:
                raise RuntimeError("element-wise metrics after Wasserstein sorted the rows")
            ref_norms = [math.sqrt(v) for v in self.ref_squares]
            cosine = np.zeros((len(arrays) + 1, 2), dtype=np.bool_)
            norms = [0.0] * len(arrays)
            if "cosine" in chosen:  # as l2_norm sums: cosine needs it exact
                norms = [_norm(x) for x in arrays.values()]
                row_norms = np.array([*norms, ref_norms[0], *ref_norms])
                cosine[:] = (row_norms[:-2, None] != 0.0) & (np.array(ref_norms)[None, :] != 0.0)
            row_norms = np.array([*norms, ref_norms[0], *ref_norms])
            out = self.loops.row_sums(
                self.narrow, self.consensus, self.fp64_flat, row_norms, cosine, BLOCK
            )
            rows = [*arrays, None]
            sums = {r: [tuple(out[i, k]) for k in (0, 1)] for i, r in enumerate(rows)}
            row_norm = {**dict(zip(arrays, norms, strict=True)), None: ref_norms[0]}
            _write_elementwise(chosen, sums, row_norm, self.ref_squares, vs_c, vs_f, c_vs_f)
        if "wasserstein" in names:  # last user of ``narrow``: sorts it in place
            self._sort_rows()
            self.sorted_rows = True
            size = self.fp64_flat.size
            sf = self._sorted_fp64()
            sc = np.empty(size)
            totals, consensus_total = self.loops.wasserstein_sums(
                self.narrow, self.network, sf, sc, BLOCK
            )
            _write_wasserstein(arrays, totals, consensus_total, sc, sf, vs_c, vs_f, c_vs_f)
        if "channel_moments" in names:
            _distributional(
                "channel_moments", channel_moments, channel_moment_difference,
                arrays, self.fp64, vs_c, vs_f, c_vs_f, self.sort_keys,
            )  # fmt: skip

    def _sort_rows(self) -> None:
        """Sort every row of ``narrow`` in place (those kept sorted are copied back)."""
        keys = list(self.sort_keys[: len(self.narrow)]) or [None] * len(self.narrow)
        if not sorted_cache.active() or not any(keys):
            self.loops.sort_rows(self.narrow)
            return
        for row, key in zip(self.narrow, keys, strict=True):
            kept = sorted_cache.get(key)
            if kept is not None:
                row[:] = kept
                continue
            self.loops.sort_rows(row.reshape(1, -1))
            sorted_cache.put(key, row)

    def _sorted_fp64(self) -> np.ndarray:
        """The fp64 reference's values, sorted (kept across passes under its key)."""
        key = self.sort_keys[len(self.narrow)] if len(self.sort_keys) > len(self.narrow) else None
        kept = sorted_cache.get(key)
        if kept is not None:
            return kept
        values = self.loops.sorted64(self.fp64_flat)
        sorted_cache.put(key, values)
        return values


def _compiled(
    kernels: Any, arrays: Mapping[str, np.ndarray], fp64: np.ndarray
) -> _CompiledPass | None:
    """The float32 rows and the consensus of the compiled loops.

    Returns:
        Their shared pass; ``None`` when a capture is not float32-exact (the NumPy path
        takes it); :data:`_GENERIC` when a value is NaN or inf.
    """
    from anpred.analysis import compiled_reads

    size = fp64.size
    narrow = np.empty((len(arrays), size), dtype=np.float32)
    finite = True  # every row: checked as it is copied
    for row, x in zip(narrow, arrays.values(), strict=True):
        if x.dtype == np.float32:
            finite &= compiled_reads.copy_finite(np.ascontiguousarray(x).reshape(-1), row)
        elif not kernels.round_to_float32(_flat64(x), row):
            return None
        else:
            finite &= compiled_reads.all_finite(row)
    consensus = np.empty(size)
    network = np.array(sorting_network(len(arrays)), dtype=np.int64).reshape(-1, 2)
    kernels.row_medians(narrow, network, consensus)
    ref_squares = (block_sum_of_squares(consensus), block_sum_of_squares(fp64))
    if not (finite and all(math.isfinite(v) for v in ref_squares)):
        return _GENERIC
    return _CompiledPass(kernels, narrow, consensus, network, ref_squares, fp64, _flat64(fp64))


def _wide(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``arrays`` in float64 (float32 ones converted: the same values) for the NumPy and
    generic paths, which compute in the arrays' own type.
    """
    return {p: np.asarray(x, dtype=np.float64) for p, x in arrays.items()}


def _norm(x: np.ndarray) -> float:
    """:func:`~anpred.analysis.metrics.l2_norm` of ``x``'s float64 values: a float32 array's
    blocks are converted one at a time and summed as ``l2_norm`` sums its blocks (bitwise
    the same number as ``l2_norm`` of the float64 copy, without the copy).
    """
    if x.dtype != np.float32:
        return l2_norm(x)
    flat, wide = x.reshape(-1), np.empty(min(x.size, BLOCK))
    total = 0.0
    for start in range(0, flat.size, BLOCK):
        block = wide[: min(BLOCK, flat.size - start)]
        block[:] = flat[start : start + BLOCK]
        total += _dot(block, block)
    return math.sqrt(total)


def _flat64(x: np.ndarray) -> np.ndarray:
    """``x`` as a flat C-contiguous float64 array (no copy when it is one already)."""
    return np.ascontiguousarray(x, dtype=np.float64).reshape(-1)


def measure_generic(
    metrics: Sequence[Metric],
    arrays: Mapping[str, np.ndarray],
    fp64: np.ndarray,
    more: More | None = None,
) -> AnchorMetrics:
    """The reference computation: each metric on its own, through the registry (``more``:
    as :func:`measure_anchor`'s).
    """
    consensus = elementwise_median(list(arrays.values()))
    result = _generic(metrics, arrays, fp64, consensus)
    names = [m.name for m in metrics]
    extra = [m for m in (more(result) if more else ()) if m.name not in names]
    if not extra:
        return result
    rest = _generic(extra, arrays, fp64, consensus)
    return AnchorMetrics(
        {p: {**v, **rest.vs_consensus[p]} for p, v in result.vs_consensus.items()},
        {p: {**v, **rest.vs_fp64[p]} for p, v in result.vs_fp64.items()},
        {**result.consensus_vs_fp64, **rest.consensus_vs_fp64},
    )


def _generic(
    metrics: Sequence[Metric],
    arrays: Mapping[str, np.ndarray],
    fp64: np.ndarray,
    consensus: np.ndarray,
) -> AnchorMetrics:
    transformed = {p: {m.name: m.transform(x) for m in metrics} for p, x in arrays.items()}
    fp64_t = {m.name: m.transform(fp64) for m in metrics}
    consensus_t = {
        m.name: elementwise_median([transformed[p][m.name] for p in arrays])
        if m.distributional
        else m.transform(consensus)
        for m in metrics
    }

    def against(tx: Mapping[str, Any], tc: Mapping[str, Any]) -> dict[str, float]:
        return {m.name: m.compare(tx[m.name], tc[m.name]) for m in metrics}

    return AnchorMetrics(
        {p: against(transformed[p], consensus_t) for p in arrays},
        {p: against(transformed[p], fp64_t) for p in arrays},
        against(consensus_t, fp64_t),
    )


_FirstPass = tuple[
    dict[str, np.ndarray], dict[str, bool], dict[str, float], np.ndarray, tuple[float, float]
]


def _first_pass(arrays: Mapping[str, np.ndarray], fp64: np.ndarray) -> _FirstPass | None:
    """Float32 roundings, their exactness, L2 norms and the consensus, in one blocked pass.

    Returns ``(narrow, exact, norms, consensus, (Σ consensus², Σ fp64²))``, or ``None``
    when an array holds a NaN or inf (its sum of squares is not finite).
    Norms are summed per :data:`BLOCK` block exactly as
    :func:`~anpred.analysis.metrics.l2_norm` does (cosine amplifies a one-ulp change of a
    norm to ~1e-9 relative). The consensus is the element-wise median (NaN-free here), in
    float32 where every participant's block is float32-exact, else in float64.
    """
    flats = {p: x.reshape(-1) for p, x in arrays.items()}
    size, count = fp64.size, len(arrays)
    narrow = {p: np.empty(size, dtype=np.float32) for p in arrays}
    exact = dict.fromkeys(arrays, True)
    squares = dict.fromkeys(arrays, 0.0)
    consensus = np.empty(size)
    fp64_flat = fp64.reshape(-1)
    c_squares = f_squares = 0.0
    block = min(size, BLOCK)
    median32 = MedianNetwork(count, block, np.float32)
    median64 = MedianNetwork(count, block, np.float64)
    equal = np.empty(block, dtype=bool)
    for start in range(0, size, BLOCK):
        stop = min(start + BLOCK, size)
        block_exact = True
        for p, flat in flats.items():
            xb, nb = flat[start:stop], narrow[p][start:stop]
            nb[:] = xb  # rounds to float32
            squares[p] += _dot(xb, xb)
            if exact[p] or block_exact:
                same = bool(np.equal(nb, xb, out=equal[: stop - start]).all())
                exact[p] &= same
                block_exact &= same
        if block_exact:
            median32.median([narrow[p][start:stop] for p in arrays], consensus[start:stop])
        else:
            median64.median([f[start:stop] for f in flats.values()], consensus[start:stop])
        c_squares += _dot(consensus[start:stop], consensus[start:stop])
        f_block = fp64_flat[start:stop]
        f_squares += _dot(f_block, f_block)
    norms = {p: math.sqrt(v) for p, v in squares.items()}
    references = (c_squares, f_squares)
    if not all(math.isfinite(v) for v in (*norms.values(), *references)):
        return None
    return narrow, exact, norms, consensus.reshape(fp64.shape), references


def _elementwise(
    chosen: list[str],
    arrays: Mapping[str, np.ndarray],
    narrow: Mapping[str, np.ndarray],
    norms: Mapping[str, float],
    consensus: np.ndarray,
    reference_squares: tuple[float, float],
    fp64: np.ndarray,
    vs_c: dict[str, dict[str, float]],
    vs_f: dict[str, dict[str, float]],
    c_vs_f: dict[str, float],
) -> None:
    """rel_l2, max_abs, max_ulp and cosine of every pair, block by block."""
    ulp, cos = "max_ulp" in chosen, "cosine" in chosen
    flats = {p: x.reshape(-1) for p, x in arrays.items()}
    c_flat, f_flat = consensus.reshape(-1), fp64.reshape(-1)
    ref_squares = reference_squares  # Σc², Σf² summed as l2_norm sums them
    nc, nf = math.sqrt(ref_squares[0]), math.sqrt(ref_squares[1])  # = l2_norm of each
    rows = [*arrays, None]  # participants, then the consensus (against fp64 only)
    row_norm = {**norms, None: nc}
    # accumulators: [row][0 = vs consensus, 1 = vs fp64]
    squares = {r: [0.0, 0.0] for r in rows}
    largest = {r: [0.0, 0.0] for r in rows}
    ulps = {r: [0, 0] for r in rows}
    cosines = {r: [0.0, 0.0] for r in rows}
    size = c_flat.size
    b = min(size, BLOCK)
    diff, scaled, scratch = (np.empty(b) for _ in range(3))
    kx, kc, kf = (np.empty(b, dtype=np.int32) for _ in range(3))
    unit_c, unit_f = np.empty(b), np.empty(b)
    keys = UlpKeys(b)
    cos_ok = {r: row_norm[r] != 0.0 for r in rows}
    for start in range(0, size, BLOCK):
        stop = min(start + BLOCK, size)
        n = stop - start
        cb, fb = c_flat[start:stop], f_flat[start:stop]
        key_c = key_f = kc  # placeholders when max_ulp is not asked for
        if cos:
            if nc != 0.0:
                np.divide(cb, nc, out=unit_c[:n])
            if nf != 0.0:
                np.divide(fb, nf, out=unit_f[:n])
        if ulp:
            key_c, key_f = keys.of(cb, kc), keys.of(fb, kf)
        refs = [(cb, unit_c[:n], key_c), (fb, unit_f[:n], key_f)]
        for r in rows:
            xb = cb if r is None else flats[r][start:stop]
            if ulp:
                if r is None:
                    key_x = key_c
                else:
                    key_x = keys.of(narrow[r][start:stop], kx)
            if cos and cos_ok[r]:
                np.divide(xb, row_norm[r], out=scaled[:n])
            for k, (ref, unit, key_ref) in enumerate(refs):
                if r is None and k == 0:
                    continue
                d = np.subtract(xb, ref, out=diff[:n])
                squares[r][k] += _dot(d, d)
                largest[r][k] = max(largest[r][k], float(d.max()), -float(d.min()))
                if ulp:
                    ulps[r][k] = max(ulps[r][k], keys.largest_distance(key_x, key_ref))
                if cos and cos_ok[r] and (nc if k == 0 else nf) != 0.0:
                    t = np.subtract(scaled[:n], unit, out=scratch[:n])
                    cosines[r][k] += _dot(t, t)
    sums = {
        r: [(squares[r][k], largest[r][k], ulps[r][k], cosines[r][k]) for k in (0, 1)] for r in rows
    }
    _write_elementwise(chosen, sums, row_norm, ref_squares, vs_c, vs_f, c_vs_f)


_Sums = dict[str | None, list[tuple[float, float, int, float]]]
"""Per row (a participant, ``None`` for the consensus) and reference (0 = consensus,
1 = fp64): Σ (x − ref)², max |x − ref|, max ULP32 and the cosine's Σ of squares."""


def _write_elementwise(
    chosen: Sequence[str],
    sums: _Sums,
    row_norm: Mapping[str | None, float],
    ref_squares: tuple[float, float],
    vs_c: dict[str, dict[str, float]],
    vs_f: dict[str, dict[str, float]],
    c_vs_f: dict[str, float],
) -> None:
    """The element-wise metrics in ``chosen`` from their sums, by the generic rules."""
    ref_norms = (math.sqrt(ref_squares[0]), math.sqrt(ref_squares[1]))
    for r, per_ref in sums.items():
        for k, (squares, largest, ulps, cosines) in enumerate(per_ref):
            if r is None and k == 0:
                continue
            target = c_vs_f if r is None else (vs_c[r] if k == 0 else vs_f[r])
            if "rel_l2" in chosen:
                target["rel_l2"] = _relative(squares, ref_squares[k])
            if "max_abs" in chosen:
                target["max_abs"] = largest
            if "max_ulp" in chosen:
                target["max_ulp"] = float(ulps)
            if "cosine" in chosen:
                nx, ref_norm = row_norm[r], ref_norms[k]
                if nx == 0.0 or ref_norm == 0.0:
                    target["cosine"] = 0.0 if nx == ref_norm else 1.0
                else:
                    target["cosine"] = 0.5 * cosines


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.einsum("i,i->", a, b))


def _relative(difference_sq: float, reference_sq: float) -> float:
    """``metrics.relative_l2``'s rule from the two sums of squares."""
    difference, reference = math.sqrt(difference_sq), math.sqrt(reference_sq)
    if reference < ZERO_NORM:
        return 0.0 if difference < ZERO_NORM else math.inf
    return difference / reference


def _sorted(x: np.ndarray, narrow: np.ndarray | None) -> np.ndarray:
    """Sorted values: ``narrow`` sorted in place when given (exact float32), else float64."""
    if narrow is not None:
        narrow.sort()
        return narrow
    return np.sort(np.asarray(x, dtype=np.float64).reshape(-1))  # no copy before the sort


def _wasserstein(
    arrays: Mapping[str, np.ndarray],
    narrow: Mapping[str, np.ndarray],
    exact: Mapping[str, bool],
    fp64: np.ndarray,
    vs_c: dict[str, dict[str, float]],
    vs_f: dict[str, dict[str, float]],
    c_vs_f: dict[str, float],
) -> None:
    """Wasserstein-1 over the spread (``metrics.wasserstein``) of every pair, exactly.

    Sorts the float32 roundings in ``narrow`` in place where they are exact.
    """
    described = [_sorted(x, narrow[p] if exact[p] else None) for p, x in arrays.items()]
    sf = np.sort(fp64.reshape(-1))  # float32-exact or not: the same sorted values
    size = sf.size
    block = min(size, BLOCK)
    sc = np.empty(size)  # consensus descriptor, filled block by block
    median = MedianNetwork(len(described), block, work_dtype(described))
    scratch, wide = np.empty(block), np.empty(block)
    totals = [[0.0, 0.0] for _ in described]
    consensus_total = 0.0
    for start in range(0, size, BLOCK):
        stop = min(start + BLOCK, size)
        d, w = scratch[: stop - start], wide[: stop - start]
        cb, fb = sc[start:stop], sf[start:stop]
        median.median([s[start:stop] for s in described], cb)  # NaN-free here
        for total, s in zip(totals, described, strict=True):
            w[:] = s[start:stop]  # float32 to float64 once for both comparisons (exact)
            for k, ref in enumerate((cb, fb)):
                np.subtract(w, ref, out=d)
                np.abs(d, out=d)
                total[k] += float(np.sum(d))
        np.subtract(cb, fb, out=d)
        np.abs(d, out=d)
        consensus_total += float(np.sum(d))
    _write_wasserstein(arrays, totals, consensus_total, sc, sf, vs_c, vs_f, c_vs_f)


def _write_wasserstein(
    arrays: Mapping[str, np.ndarray],
    totals: Sequence[Sequence[float]],
    consensus_total: float,
    sc: np.ndarray,
    sf: np.ndarray,
    vs_c: dict[str, dict[str, float]],
    vs_f: dict[str, dict[str, float]],
    c_vs_f: dict[str, float],
) -> None:
    """``metrics.wasserstein`` of every pair from its Σ |s − ref| and the sorted references."""
    size = sf.size
    spread_c, spread_f = _spread_sorted(sc), _spread_sorted(sf)
    for p, (to_c, to_f) in zip(arrays, totals, strict=True):
        vs_c[p]["wasserstein"] = _ratio(float(to_c) / size, spread_c)
        vs_f[p]["wasserstein"] = _ratio(float(to_f) / size, spread_f)
    c_vs_f["wasserstein"] = _ratio(float(consensus_total) / size, spread_f)


def _distributional(
    name: str,
    describe: Any,
    compare: Any,
    arrays: Mapping[str, np.ndarray],
    fp64: np.ndarray,
    vs_c: dict[str, dict[str, float]],
    vs_f: dict[str, dict[str, float]],
    c_vs_f: dict[str, float],
    keys: Sequence[Hashable | None] = (),
) -> None:
    """A descriptor metric of every pair: each array described once (an array with a key,
    ``keys`` as :attr:`_CompiledPass.sort_keys`, described once across passes while
    :func:`anpred.analysis.sorted_cache.kept`).
    """
    keys = list(keys) or [None] * (len(arrays) + 1)

    def described_once(x: np.ndarray, key: Hashable | None) -> np.ndarray:
        tagged = None if key is None else (name, key)
        kept = sorted_cache.get(tagged)
        if kept is not None:
            return kept
        value = describe(x)
        sorted_cache.put(tagged, value)
        return value

    described = {p: described_once(x, k) for (p, x), k in zip(arrays.items(), keys, strict=False)}
    df = described_once(fp64, keys[len(arrays)])
    dc = elementwise_median(list(described.values()))
    for p, d in described.items():
        vs_c[p][name] = compare(d, dc)
        vs_f[p][name] = compare(d, df)
    c_vs_f[name] = compare(dc, df)
