"""Verdicts of the consensus oracle: one per (participant, anchor, input), with its statistics.

A :class:`Verdict` is truthy when the participant passed (no finding), like Polygraphy's
``OutputCompareResult``; it carries every number the decision was made from, so a report
can show why a deviation is or is not a finding.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass


class Criterion(enum.Enum):
    """A condition the oracle checks; a finding needs all of a verdict's required ones."""

    OUTLIER = "outlier"
    """The deviation is a robust outlier of the anchor's population (median + k·scale)."""
    ABOVE_NOISE = "above_noise"
    """The deviation exceeds the noise factor times the fp64-calibrated noise floor (the
    fixed NOISE_FACTOR, or the anchor's calibrated factor: ``docs/oracle.md``)."""
    FARTHER_FROM_FP64 = "farther_from_fp64"
    """Pairwise mode: the participant is the one of the pair farther from fp64."""
    NON_FINITE = "non_finite"
    """The participant produced NaN/inf where the fp64 reference is finite (always a finding)."""
    INTRODUCED = "introduced"
    """Stage isolation: the error the stage introduces by itself (run on the fp64
    reference's stage input) is a robust outlier of the anchor's population of introduced
    errors and exceeds the noise factor (fixed or calibrated) times the fp32 reference's own
    (always a finding)."""


POPULATION_CRITERIA = frozenset({Criterion.OUTLIER, Criterion.ABOVE_NOISE})
"""Required for a finding when three or more participants form a consensus."""

PAIRWISE_CRITERIA = frozenset({Criterion.ABOVE_NOISE, Criterion.FARTHER_FROM_FP64})
"""Required for a finding when only two participants are compared."""

CLASS_FLOOR_CRITERIA = frozenset({Criterion.ABOVE_NOISE})
"""Required for a finding in a reduced-precision class of fewer than three members: the
deviation from fp64 above the class factor times its ideal reference's (no population to
be an outlier of)."""

SUFFICIENT_CRITERIA = frozenset({Criterion.NON_FINITE, Criterion.INTRODUCED})
"""Each is a finding on its own."""


@dataclass(frozen=True)
class MetricJudgement:
    """One metric of one deviation, set against its population and noise floor.

    Attributes:
        metric: Metric name.
        value: The participant's deviation from the consensus.
        population_median: Median of the anchor's population of deviations.
        mad: Median absolute deviation of the population from its median.
        scale: Spread used for the outlier test: max(1.4826·MAD, floors).
        outlier_threshold: population_median + OUTLIER_K · scale.
        noise_floor: The fp32 reference's deviation from fp64 at this anchor and input.
        noise_threshold: factor · max(noise_floor, metric resolution); the factor is
            NOISE_FACTOR or the anchor's calibrated one.
        outlier: Whether value > outlier_threshold.
        above_noise: Whether value > noise_threshold.
    """

    metric: str
    value: float
    population_median: float
    mad: float
    scale: float
    outlier_threshold: float
    noise_floor: float
    noise_threshold: float
    outlier: bool
    above_noise: bool

    @property
    def threshold(self) -> float:
        """The value a deviation must exceed to pass both criteria."""
        return max(self.outlier_threshold, self.noise_threshold)


@dataclass(frozen=True)
class Verdict:
    """The oracle's decision on one participant at one anchor for one input.

    Attributes:
        participant: Participant name.
        anchor: Anchor name.
        input_id: Input identifier.
        primary: The metric that decides (relative L2 by default).
        secondary: The other metrics, judged by the same rule; they do not change the
            verdict but show which kinds of deviation corroborate a finding.
        vs_fp64: The participant's metrics against the fp64 reference.
        consensus_vs_fp64: The consensus's metrics against the fp64 reference.
        pairwise: True when only two participants were compared at this anchor and
            input: the consensus is then their midpoint, both deviate from it equally, and
            the finding goes to the one farther from fp64 (see ``required``).
        non_finite: Elements that are NaN/inf in the capture but finite in fp64.
        required: Criteria that must all be exceeded for a finding.
        exceeded: Criteria the deviation exceeded.
        introduced: The stage-isolation judgement (introduced error against its
            population and the fp32 reference's introduced error), when isolation ran.
        precision: The precision class the participant was judged in (``fp32``, or a
            reduced class such as ``bf16``: then ``primary`` is its distance from fp64,
            its noise floor the class's ideal reference's, and ``consensus_vs_fp64`` the
            ideal reference's distances).
    """

    participant: str
    anchor: str
    input_id: str
    primary: MetricJudgement
    secondary: Mapping[str, MetricJudgement]
    vs_fp64: Mapping[str, float]
    consensus_vs_fp64: Mapping[str, float]
    pairwise: bool
    non_finite: int
    required: frozenset[Criterion]
    exceeded: frozenset[Criterion]
    introduced: MetricJudgement | None = None
    precision: str = "fp32"

    @property
    def finding(self) -> bool:
        """Whether the deviation is a finding.

        A finding needs every required criterion, or one of the sufficient ones: non-finite
        values, or an introduced error that stands out (see :attr:`Criterion.INTRODUCED`).
        """
        return bool(self.exceeded & SUFFICIENT_CRITERIA) or self.required <= self.exceeded

    @property
    def passed(self) -> bool:
        """Whether the participant passed (no finding)."""
        return not self.finding

    def __bool__(self) -> bool:
        return self.passed

    @property
    def unmet(self) -> frozenset[Criterion]:
        """Required criteria the deviation did not exceed (why a non-finding passed)."""
        return self.required - self.exceeded

    @property
    def closer_to_fp64(self) -> bool:
        """Whether the participant is closer to the fp64 reference than the consensus is.

        Consensus blames the participant that differs from the majority; when the majority
        shares an error (for example every library but one uses the same inexact kernel)
        a finding can fall on the accurate participant. This flag lets a report say so.
        """
        metric = self.primary.metric
        own = self.vs_fp64.get(metric, math.nan)
        return bool(own < self.consensus_vs_fp64.get(metric, math.nan))

    @property
    def corroborating(self) -> tuple[str, ...]:
        """Secondary metrics that would also have flagged this deviation."""
        return tuple(name for name, j in self.secondary.items() if j.above_noise and j.outlier)

    def statistics(self) -> dict[str, float | int | bool | str]:
        """Flat statistics for reports: the primary metric's numbers and the decision."""
        p = self.primary
        return {
            "metric": p.metric,
            "value": p.value,
            "population_median": p.population_median,
            "mad": p.mad,
            "scale": p.scale,
            "outlier_threshold": p.outlier_threshold,
            "noise_floor": p.noise_floor,
            "noise_threshold": p.noise_threshold,
            "vs_fp64": self.vs_fp64.get(p.metric, math.nan),
            "consensus_vs_fp64": self.consensus_vs_fp64.get(p.metric, math.nan),
            "pairwise": self.pairwise,
            "non_finite": self.non_finite,
            "exceeded": ",".join(sorted(c.value for c in self.exceeded)),
            "passed": self.passed,
            "introduced": self.introduced.value if self.introduced else math.nan,
            "introduced_threshold": self.introduced.threshold if self.introduced else math.nan,
            "precision": self.precision,
        }
