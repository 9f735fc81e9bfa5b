"""What several output-level baselines compute of one input's outputs, computed once.

Each baseline of :mod:`anpred.analysis.baselines` compares every participant's output with
the references on its own, as its source does: Polygraphy's comparison and the three
max-abs thresholds each take max |a − b| against the fp32 reference output, CRADLE and
dynamo the mean absolute and the mean squared difference from the fp64 reference (a
difference and its negation have one square), and the fp32 reference's own numbers are
computed again for it as a participant. Judged together
(:func:`anpred.analysis.baselines.judge_baselines`), the baselines share one
:class:`SharedOutputs`: each such number is computed once, by the formula the baseline
uses itself, so it is the same number bit for bit. With the compiled loops, float32
outputs are read as they are (no float64 copy per output), and Polygraphy's arrays are
reused from one participant to the next. Measured on a yolov8n run (8 inputs, six libraries,
output 1 × 84 × 8400; CPU per input, this code and the one before alternating in one
script): the baselines 0.113 -> 0.057 s, statistics and verdicts byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

_KEPT = (np.dtype(np.float32), np.dtype(np.float64))
"""Dtypes the compiled loops read as they are (each value widened to float64 there)."""


def flat_kept(x: np.ndarray) -> np.ndarray:
    """``x`` flat and C-contiguous as the compiled loops read it: float32 and float64 as
    they are (no copy when ``x`` is contiguous), any other dtype as float64.
    """
    x = np.asarray(x)
    return np.ascontiguousarray(x, dtype=None if x.dtype in _KEPT else np.float64).reshape(-1)


def fp64_means(
    output: np.ndarray,
    truth: np.ndarray,
    loops: Any,
    buffers: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[float, float]:
    """``np.mean(np.abs(a − truth))`` and ``np.mean(np.square(truth − a))`` of a non-empty
    output ``a`` (``output``'s float64 values) against float64 ``truth``: the numbers of
    those expressions, the difference formed once (by ``loops``,
    :mod:`anpred.analysis.compiled_outputs`, when given and the shapes are equal, into
    ``buffers``: two C-contiguous float64 arrays of ``truth``'s shape, when given).
    """
    if loops is not None and np.shape(output) == truth.shape:
        # the arrays the expressions form: of truth's shape, C-contiguous, float64
        absolute, squares = buffers or (np.empty(truth.shape), np.empty(truth.shape))
        loops.fp64_errors(
            flat_kept(output),
            np.ascontiguousarray(truth).reshape(-1),
            absolute.reshape(-1),
            squares.reshape(-1),
        )
    else:
        difference = np.asarray(output, dtype=np.float64) - truth
        absolute = np.abs(difference)
        squares = np.square(difference, out=difference)
    return float(np.mean(absolute)), float(np.mean(squares))


@dataclass
class SharedOutputs:
    """Numbers several baselines take of one input's outputs, each computed once; valid for
    one ``(outputs, fp32 reference, fp64 reference)`` only.

    Attributes:
        reference: The participant whose output is the fp32 reference output (the same
            array), if one is judged: its numbers are the reference's.
        max_absdiff: Per participant, max |a − fp32 reference| (NaN when a difference is).
        means: Per participant, :func:`fp64_means` of its output.
    """

    reference: str | None = None
    max_absdiff: dict[str, float] = field(default_factory=dict)
    means: dict[str, tuple[float, float]] = field(default_factory=dict)
    _wide: np.ndarray | None = None
    _buffers: tuple[np.ndarray, np.ndarray] | None = None  # fp64_means' arrays, reused

    def reference64(self, fp32_reference: np.ndarray) -> np.ndarray:
        """``np.asarray(fp32_reference, dtype=np.float64)``, converted once."""
        if self._wide is None:
            self._wide = np.asarray(fp32_reference, dtype=np.float64)
        return self._wide

    def fp64_means(
        self, participant: str | None, output: np.ndarray, truth: np.ndarray, loops: Any
    ) -> tuple[float, float]:
        """:func:`fp64_means` of ``participant``'s ``output`` (``None``: the fp32 reference
        output), once per participant.
        """
        key = self.reference if participant is None else participant
        if key is not None and key in self.means:
            return self.means[key]
        if self._buffers is None or self._buffers[0].shape != truth.shape:
            self._buffers = (np.empty(truth.shape), np.empty(truth.shape))
        means = fp64_means(output, truth, loops, self._buffers)
        if key is not None:
            self.means[key] = means
        return means
