"""Arithmetic of stage isolation: error a stage introduces versus error it inherits.

Stage isolation (run by the lead's executor) feeds every stage of a participant with the
fp64 reference's input to that stage, rounded to float32, and captures the stage's
output. Comparing that output with the fp64 reference's output gives the error the stage
*introduces* by itself; the participant's end-to-end capture at the same anchor gives
the *total* error there, which also contains everything inherited from earlier stages.
Stages are named by the anchor they produce.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from anpred.analysis import metrics
from anpred.errors import UsageError
from anpred.localization._plain import plain_float


def relative_l2(x: np.ndarray, ref: np.ndarray) -> float:
    """Relative L2 distance ``||x - ref||_2 / ||ref||_2`` of a stage output, in float64.

    Computed by :func:`anpred.analysis.metrics.relative_l2`, anpred's one relative L2,
    so its zero-reference rule holds (against a reference of norm below ``ZERO_NORM``:
    0 when ``x`` is zero too, ``inf`` otherwise) and introduced errors are judged with
    the oracle's ``rel_l2`` resolution. On top of it this checks the arguments and counts
    a non-finite value in ``x`` (NaN included) as an infinite error: a stage that turns
    a finite input into NaN introduces an error, and the oracle judges ``inf`` (it skips
    NaN).

    Raises:
        UsageError: When the shapes differ or ``ref`` is not finite.
    """
    x = np.asarray(x)
    ref = np.asarray(ref)
    if x.shape != ref.shape:
        raise UsageError(f"shapes differ: {x.shape} vs reference {ref.shape}")
    ref64 = ref.astype(np.float64, copy=False)
    if not np.all(np.isfinite(ref64)):
        raise UsageError("the reference must be finite")
    x64 = x.astype(np.float64, copy=False)
    if not np.all(np.isfinite(x64)):
        return math.inf
    return metrics.relative_l2(x64, ref64)


class IntroducedErrors:
    """:func:`relative_l2` of several stage outputs against one reference: each the same
    number bit for bit, the reference checked and its norm summed once
    (:func:`anpred.analysis.metrics.relative_l2_given`). Given a finite reference the
    relative L2 is NaN exactly when ``x`` holds a NaN, read as ``inf`` as
    :func:`relative_l2` reads it; an inf in ``x`` gives ``inf`` by itself.

    Raises:
        UsageError: When ``ref`` is not finite, or (calling) a shape differs.
    """

    def __init__(self, ref: np.ndarray) -> None:
        self.ref64 = np.asarray(ref).astype(np.float64, copy=False)
        if not np.all(np.isfinite(self.ref64)):
            raise UsageError("the reference must be finite")
        self.reference_sq = metrics.block_sum_of_squares(self.ref64)

    def __call__(self, x: np.ndarray) -> float:
        """The introduced error of stage output ``x`` (float32 is taken as it is: the
        differences are formed in float64 block by block, the same numbers as from a
        float64 copy).
        """
        x = np.asarray(x)
        if x.shape != self.ref64.shape:
            raise UsageError(f"shapes differ: {x.shape} vs reference {self.ref64.shape}")
        x64 = x if x.dtype == np.float32 else x.astype(np.float64, copy=False)
        value = metrics.relative_l2_given(x64, self.ref64, self.reference_sq)
        return math.inf if math.isnan(value) else value


@dataclass(frozen=True)
class StageError:
    """Introduced, inherited and total error of one stage.

    Attributes:
        stage: The stage, named by the anchor it produces.
        introduced: Relative L2 of the isolated stage output vs the fp64 reference output.
        inherited: End-to-end deviation at the stage's input (the previous anchor's
            total; for the first stage, the deviation of the model input).
        total: End-to-end deviation at the stage's output anchor.
    """

    stage: str
    introduced: float
    inherited: float
    total: float

    @property
    def introduced_ratio(self) -> float | None:
        """``introduced / total``; ``None`` when the total is 0 or either is not finite.

        Near 1 the stage itself causes the error at its anchor; near 0 it mostly passes
        on (amplified or not) what it inherits. Above 1 the inherited error partly
        cancels what the stage introduces.
        """
        if not (math.isfinite(self.introduced) and math.isfinite(self.total)):
            return None
        return self.introduced / self.total if self.total > 0 else None

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready plain data (non-finite errors as ``null``)."""
        return {
            "stage": self.stage,
            "introduced": plain_float(self.introduced),
            "inherited": plain_float(self.inherited),
            "total": plain_float(self.total),
            "introduced_ratio": plain_float(self.introduced_ratio),
        }


@dataclass(frozen=True)
class StageIsolation:
    """Stage errors of one participant for one input, in stage order."""

    stages: tuple[StageError, ...]

    def introduced(self) -> dict[str, float]:
        """``{stage: introduced error}``, the input of stage concentration."""
        return {s.stage: s.introduced for s in self.stages}

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready plain data."""
        return {"stages": [s.to_dict() for s in self.stages]}


def stage_isolation(
    stages: Sequence[str],
    isolated: Mapping[str, np.ndarray],
    reference: Mapping[str, np.ndarray],
    end_to_end: Mapping[str, np.ndarray],
    *,
    input_deviation: float = 0.0,
) -> StageIsolation:
    """Separate the error each stage introduces from the error it inherits.

    Args:
        stages: The stages in topological order, named by the anchor each produces.
        isolated: ``{stage: participant's stage output}`` when run on the fp64
            reference's stage input rounded to float32.
        reference: ``{stage: fp64 reference output at that anchor}``.
        end_to_end: ``{stage: participant's end-to-end capture at that anchor}``.
        input_deviation: Deviation of the participant's model input from the fp64 input
            (the first stage's inherited error); 0 for float32-representable inputs.

    Returns:
        The per-stage errors.

    Raises:
        UsageError: When a stage is missing from a mapping or shapes differ.
    """
    result = []
    inherited = float(input_deviation)
    for stage in stages:
        missing = [
            name
            for name, mapping in (
                ("isolated", isolated),
                ("reference", reference),
                ("end_to_end", end_to_end),
            )
            if stage not in mapping
        ]
        if missing:
            raise UsageError(f"stage '{stage}' missing from {', '.join(missing)}")
        introduced = relative_l2(isolated[stage], reference[stage])
        total = relative_l2(end_to_end[stage], reference[stage])
        result.append(StageError(stage, introduced, inherited, total))
        inherited = total
    return StageIsolation(tuple(result))
