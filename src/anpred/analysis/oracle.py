"""The consensus-based population deviation oracle.

**Phase 1** (:func:`assess`, one anchor and one input at a time, so memory stays flat):
the aligned captures of all participants are reduced to their consensus, the
element-wise median (robust to one deviant participant; for a distributional metric the
element-wise median of the participants' descriptors). Every participant's deviation
from the consensus is measured with every registered metric, as is its distance from the
fp64 reference. The **noise floor** is the fp32 reference's distance from the fp64
reference: what fp32 execution of the reference model itself costs at this anchor. Phase
1 returns small records only (:class:`AnchorEvidence`).

**Phase 2** (:func:`judge_anchor`, per anchor): the population is every participant's
deviation for every input at that anchor. A deviation ``v`` is a **finding** when it is

* a robust outlier of the population: ``v > median + OUTLIER_K · scale`` with
  ``scale = max(1.4826 · MAD, MAD_FLOOR_REL · median, resolution)``, **and**
* above the noise floor: ``v > factor · max(noise floor, resolution)``,

or when the participant produced non-finite values where the fp64 reference is finite.
The factor is ``NOISE_FACTOR`` (the *fixed* rule) unless ``OracleParams.calibration``
gives the anchor its own, learnt from the spread of clean fp32 implementations on
calibration inputs (:mod:`anpred.calibration.rule`, ``docs/oracle.md``).

**Introduced error** (when stage isolation ran). A stage deep in a model inherits fp32
noise from every stage before it, so its end-to-end noise floor is high (yolov8n: 1e-5 at
the neck) and a fault that adds 5e-5 there stays below ``NOISE_FACTOR`` times it, while
the same fault can show at the output against a floor of 1e-7. Stage isolation runs each
stage on the fp64 reference's stage input, so its error (the *introduced* error) carries
no inherited noise: its floor, the fp32 reference's introduced error, is about 1e-6.
The introduced errors of all participants at an anchor form a second population, judged
by the same rule (robust outlier **and** above ``NOISE_FACTOR`` times the fp32
reference's introduced error); a deviation that passes it is a finding on its own
(:attr:`Criterion.INTRODUCED`). Introduced errors are relative L2 whatever the primary
metric, so they are judged with relative L2's resolution (:data:`INTRODUCED_METRIC`).
Measured on clean fp32 runs (yolov8n and yolov5n with 8 photographs, resnet50 with 2; six
libraries): no participant's introduced error exceeded 2.0 times the fp32 reference's, so
the criterion adds no false positives there; it found the mild mantissa faults (16 and 18
kept bits) at deep YOLO stages, at 16-72 times.

**Primary metric.** Relative L2 decides the verdict: it is scale-free (comparable across
anchors, which propagation profiles need), it aggregates every element (a small
systematic error over many elements counts; one unlucky element does not), its fp32
noise is well understood (it grows like the unit roundoff times a slowly growing function
of the reduction length) and so the fp64 floor calibrates it well. The extreme metrics
(max abs, max ULP) are heavy-tailed and dominated by single elements near zero, cosine is
blind to scale errors (a wrong normalisation epsilon), and the distributional metrics are
blind to element permutations; judging on all of them would multiply false positives.
They are judged by the same rule and reported as corroborating evidence
(:attr:`Verdict.corroborating`).

**Precision classes.** Participants are judged within the precision class their
configuration declares (:mod:`anpred.library.precision`): the consensus, the population
and the noise floor above are those of the **fp32** class (the fp32 reference's and every
other fp32 participant's), so a bf16 configuration's spread never raises an fp32
library's threshold. A **reduced-precision** class (``bf16``, ``fp16``, ...) is judged
against its **ideal reference** (the fp64 model with operator results rounded to the
format, :mod:`anpred.translate.torch.emulation`): a member's deviation is its distance from
the fp64 reference, the class's floor is the ideal reference's distance from it (the error
of correct arithmetic of that format), and a deviation is above noise when it exceeds
``CLASS_FACTOR`` (or the anchor's calibrated class factor) times that floor. A class of
three or more members also needs the deviation to be a robust outlier of the class's
population (the rule above); a smaller class is judged by its floor alone. Introduced
errors are judged per class the same way (the ideal reference's own introduced error is
the class's floor). A class whose ideal reference has no capture is not judged (the run
says so).

**Where the other metrics are computed.** Only the primary metric decides, so only its
numbers (against the consensus and the fp64 reference, the noise floor, the consensus
against fp64) are computed at every (anchor, input): the *verdict path*. The other metrics
corroborate; they are computed, with the values they have when computed everywhere, for
every participant of a precision class at an (anchor, input) where one member is a
**candidate**: its primary deviation above its noise threshold, non-finite values, or an
introduced error above its own (the test of :func:`noise_candidates`; every finding is a
candidate). Elsewhere they are absent from the records (``Deviation.metrics`` holds the
primary alone, ``deviations.parquet`` has an empty cell), and their populations are those
of the cells where they were computed. ``OracleParams.metrics_scope = "all"`` (``anpred
run --metrics all``) computes them everywhere, as before; it changes no verdict.

**Two participants.** With two participants the consensus is their midpoint and both
deviate from it equally, so no population can single one out: the method degenerates to a
pairwise comparison. The verdict then says so (``pairwise=True``); the pair is
inconsistent when its deviation is above the noise floor, and the finding goes to the
participant farther from the fp64 reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from anpred.analysis.alignment import AlignmentError
from anpred.analysis.methods import register_method
from anpred.analysis.metrics import (
    Metric,
    float32_or_float64,
    get_metric,
    metric_names,
    resolutions,
)
from anpred.analysis.onepass import AnchorMetrics, measure_anchor
from anpred.analysis.verdict import (
    CLASS_FLOOR_CRITERIA,
    PAIRWISE_CRITERIA,
    POPULATION_CRITERIA,
    Criterion,
    MetricJudgement,
    Verdict,
)
from anpred.errors import UsageError
from anpred.library.precision import FP32, ideal_class, ideal_reference

if TYPE_CHECKING:
    # the calibration (anpred.calibration, a layer above) is given to the oracle, which
    # only calls it
    from anpred.calibration.rule import Calibration

OUTLIER_K = 3.5
"""Outlier cut-off in robust standard deviations (1.4826 · MAD).

3.5 is Iglewicz & Hoaglin's cut-off for the modified z-score 0.6745 (x − median) / MAD
("How to Detect and Handle Outliers", ASQC 1993), the usual choice for small samples; the
population here is participants × inputs, often a few dozen deviations."""

FIXED_RULE = "fixed"
"""Name of the fixed noise rule: :data:`NOISE_FACTOR` times the noise floor at every anchor
(the rule without a calibration; :data:`anpred.calibration.rule.RULE` is the other)."""

NOISE_FACTOR = 10.0
"""How many times the fp64-calibrated noise floor a finding must exceed.

Measured (tests/analysis/test_oracle.py, test_noise_factor_covers_fp32_reorderings): one
fp32 reduction computed with BLAS, blocked (16, 256) and permuted summation orders
deviates from the consensus by at most 1.2x the floor for 64 to 8192 terms; naive
sequential summation reaches 1.8x (1024 terms) and 4.5x (8192 terms). 10 keeps every
legitimate fp32 reordering out with a margin of 2 while precision faults worth reporting
(bf16 rounding ~4e-3, fp16 or tf32 ~5e-4 relative) are 10^2-10^4 times the floor of an
fp32 stage (~1e-7 to 1e-5)."""

MAD_FLOOR_REL = 0.1
"""The outlier scale is at least this fraction of the population median.

Deterministic participants can produce near-identical deviations on every input; their MAD
then underestimates the spread and a deviation a hair above the median would be an
outlier. With this floor a deviation must exceed the median by 35 % (3.5 · 0.1)."""

MAD_TO_SIGMA = 1.4826
"""1 / Φ⁻¹(3/4): makes the MAD a consistent estimator of a normal standard deviation."""

PRIMARY_METRIC = "rel_l2"
"""The metric that decides verdicts (see the module docstring for why)."""

CLASS_FACTOR = 3.0
"""How many times its class's ideal floor a reduced-precision deviation must exceed.

The ideal reference computes every operator exactly and rounds its result once, the least
error arithmetic of that format can have per operator; a correct implementation rounds
at other points (fused operators, bf16 kept only for conv/matmul operands, folded batch
norms) and lands near it. Measured (``docs/oracle.md``, "Precision classes"): torch's
autocast bf16 against the ideal bf16 reference, at every stage anchor of resnet50,
yolov8n, convnext_tiny and vit_b_16, 0.5-1.6 times the ideal's error. 3 keeps
legitimate implementations out with a margin of about 2, while a stage computed with a
coarser format or accumulator (fp16 where bf16 is declared, bf16 accumulation over
hundreds of terms) is several times worse."""

METRICS_CANDIDATES = "candidates"
"""``OracleParams.metrics_scope``: the primary metric everywhere, the others where the oracle
has a candidate (see the module docstring). The default: the exact Wasserstein sorts were
half of the kernel's time and decide nothing (``docs/benchmarks.md``, "The analysis")."""

METRICS_ALL = "all"
"""``OracleParams.metrics_scope``: every metric at every (anchor, input)."""

METRICS_SCOPES = (METRICS_CANDIDATES, METRICS_ALL)

INTRODUCED_METRIC = "rel_l2"
"""What introduced errors are: stage isolation computes them with
:func:`~anpred.analysis.metrics.relative_l2`, whatever the primary metric, so they are
judged with that metric's resolution (``OracleParams.resolution`` overrides it too)."""


@dataclass(frozen=True)
class OracleParams:
    """Every parameter of the oracle, with documented defaults.

    Attributes:
        outlier_k: :data:`OUTLIER_K`.
        noise_factor: :data:`NOISE_FACTOR`.
        mad_floor_rel: :data:`MAD_FLOOR_REL`.
        primary_metric: :data:`PRIMARY_METRIC`.
        metrics: Metrics to compute; ``None`` for all registered metrics. The primary
            metric is always computed.
        resolution: Per-metric overrides of the metrics' declared resolutions (the value
            below which a deviation means nothing; see :mod:`anpred.analysis.metrics`).
        calibration: Per-anchor noise factors of the primary metric and of introduced
            errors (:mod:`anpred.calibration.rule`); an anchor it has no factor for,
            and every anchor when it is ``None``, uses ``noise_factor``.
        class_factor: :data:`CLASS_FACTOR` (reduced-precision classes without a
            calibrated factor).
        metrics_scope: Where the metrics other than the primary are computed:
            :data:`METRICS_CANDIDATES` (where the oracle has a candidate) or
            :data:`METRICS_ALL` (everywhere).

    Raises:
        UsageError: An unknown ``metrics_scope``.
    """

    outlier_k: float = OUTLIER_K
    noise_factor: float = NOISE_FACTOR
    mad_floor_rel: float = MAD_FLOOR_REL
    primary_metric: str = PRIMARY_METRIC
    metrics: tuple[str, ...] | None = None
    resolution: Mapping[str, float] = field(default_factory=dict)
    calibration: Calibration | None = None
    class_factor: float = CLASS_FACTOR
    metrics_scope: str = METRICS_CANDIDATES

    def __post_init__(self) -> None:
        if self.metrics_scope not in METRICS_SCOPES:
            raise UsageError(
                f"metrics scope must be one of {', '.join(METRICS_SCOPES)}, "
                f"not {self.metrics_scope!r}"
            )

    @property
    def threshold_rule(self) -> str:
        """Which noise rule judges the primary metric: calibrated or the fixed factor."""
        return self.calibration.rule if self.calibration is not None else FIXED_RULE

    def factor(self, anchor: str) -> float:
        """The primary metric's noise factor at ``anchor`` (calibrated or fixed)."""
        found = self.calibration.factor(anchor) if self.calibration is not None else None
        return self.noise_factor if found is None else found

    def introduced_factor(self, anchor: str) -> float:
        """The noise factor of introduced errors at ``anchor`` (calibrated or fixed)."""
        cal = self.calibration
        found = cal.introduced_factor(anchor) if cal is not None else None
        return self.noise_factor if found is None else found

    def factor_of(self, precision: str, anchor: str, introduced: bool = False) -> float:
        """The noise factor of ``precision``'s class at ``anchor`` (of its introduced errors
        when ``introduced``): the fp32 factors above, or a reduced class's (calibrated, else
        ``class_factor``).
        """
        if precision == FP32:
            return self.introduced_factor(anchor) if introduced else self.factor(anchor)
        cal = self.calibration
        found = cal.class_factor(precision, anchor, introduced) if cal is not None else None
        return self.class_factor if found is None else found

    def metric_names(self) -> tuple[str, ...]:
        """Return the metrics to compute, primary first."""
        chosen = metric_names() if self.metrics is None else self.metrics
        names = (self.primary_metric, *(n for n in chosen if n != self.primary_metric))
        for name in names:
            get_metric(name)  # raises KeyError for an unknown metric
        return names


@dataclass(frozen=True)
class Deviation:
    """One participant's deviation at one anchor for one input (phase 1 record).

    Attributes:
        participant: Participant name.
        anchor: Anchor name.
        input_id: Input identifier.
        metrics: ``{metric: value}`` against the consensus.
        vs_fp64: ``{metric: value}`` against the fp64 reference.
        non_finite: Elements that are NaN/inf in the capture but finite in fp64.
        precision: The participant's precision class; in a reduced class ``metrics`` are
            its distances from the fp64 reference (see the module docstring).
    """

    participant: str
    anchor: str
    input_id: str
    metrics: Mapping[str, float]
    vs_fp64: Mapping[str, float]
    non_finite: int = 0
    precision: str = FP32


@dataclass(frozen=True)
class AnchorEvidence:
    """Everything phase 2 needs from one anchor and one input.

    Attributes:
        anchor: Anchor name.
        input_id: Input identifier.
        deviations: One record per participant.
        noise_floor: ``{metric: fp32 reference vs fp64 reference}``.
        participants: Number of participants in the consensus.
        consensus_vs_fp64: ``{metric: consensus vs fp64 reference}``; when a finding's
            own distance from fp64 is far smaller, the majority shares an error and the
            flagged participant is the accurate one (see ``Verdict.closer_to_fp64``).
        class_floors: ``{reduced class: {metric: its ideal reference vs fp64}}``.
    """

    anchor: str
    input_id: str
    deviations: tuple[Deviation, ...]
    noise_floor: Mapping[str, float]
    participants: int
    consensus_vs_fp64: Mapping[str, float] = field(default_factory=dict)
    class_floors: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    @property
    def pairwise(self) -> bool:
        """Whether the consensus degenerated to a pairwise comparison."""
        return self.participants == 2


def _as_float64(array: np.ndarray, shape: tuple[int, ...], what: str) -> np.ndarray:
    array = np.asarray(array, dtype=np.float64)
    return _checked_shape(array, shape, what)


def _as_float(array: np.ndarray, shape: tuple[int, ...], what: str) -> np.ndarray:
    """``array`` as float64, or as it is when float32 (the phase 1 kernel reads float32
    captures as they are and computes in float64: the same numbers, no copy).
    """
    return _checked_shape(float32_or_float64(array), shape, what)


def _checked_shape(array: np.ndarray, shape: tuple[int, ...], what: str) -> np.ndarray:
    if array.shape != shape:
        raise AlignmentError(
            f"{what} has shape {array.shape}, the fp64 reference {shape}; align captures "
            "with anpred.analysis.align before assessing them"
        )
    return array


def _against(
    metrics: list[Metric], tx: Mapping[str, Any], tc: Mapping[str, Any]
) -> dict[str, float]:
    """Every metric of one transformed array against another (see ``Metric.transform``)."""
    return {m.name: m.compare(tx[m.name], tc[m.name]) for m in metrics}


def _transformed(metrics: list[Metric], x: np.ndarray) -> dict[str, Any]:
    return {m.name: m.transform(x) for m in metrics}


def _new_non_finite(x: np.ndarray, fp64: np.ndarray) -> int:
    finite = np.isfinite(x)
    if finite.all():
        return 0
    return int(np.count_nonzero(~finite & np.isfinite(fp64)))


def assess(
    anchor: str,
    input_id: str,
    captures: Mapping[str, np.ndarray],
    fp32_reference: np.ndarray,
    fp64_reference: np.ndarray,
    *,
    params: OracleParams | None = None,
    classes: Mapping[str, str] | None = None,
    introduced: Mapping[str, float] | None = None,
) -> AnchorEvidence:
    """Phase 1: deviations of every participant at one anchor for one input.

    Args:
        anchor: Anchor name.
        input_id: Input identifier.
        captures: ``{participant: aligned capture}``, all of the fp64 reference's shape;
            the fp32 reference participant is one of them, and so are the ideal
            references (``torch[ideal-bf16]``) of the reduced-precision classes judged.
        fp32_reference: The reference model's fp32 capture (usually the same array as
            one of ``captures``; then its distances are not computed twice).
        fp64_reference: The reference model's fp64 capture.
        params: Oracle parameters (which metrics to compute, and where).
        classes: ``{participant: precision class}``; a participant not in it is fp32.
        introduced: Stage isolation's ``{participant: introduced error}`` at this anchor
            and input (the references' included), when it ran: an introduced error above
            its noise threshold makes a candidate too (see the module docstring).

    Returns:
        The deviation records, the noise floor and the reduced classes' floors.

    Raises:
        UsageError: With fewer than two fp32 participants and no reduced-precision one.
        AlignmentError: When a capture does not have the reference shape.
    """
    params = params or OracleParams()
    classes = classes or {}
    member = {p: classes.get(p, FP32) for p in captures if ideal_class(p) is None}
    fp32_names = [p for p, c in member.items() if c == FP32]
    if len(fp32_names) < 2 and len(fp32_names) == len(member):
        raise UsageError(
            f"anchor {anchor}: the oracle needs at least two participants, got {list(captures)}"
        )
    metrics = [get_metric(n) for n in params.metric_names()]
    fp64 = np.asarray(fp64_reference, dtype=np.float64)
    reference_name = next((p for p, x in captures.items() if x is fp32_reference), None)
    arrays = {
        p: _as_float(x, fp64.shape, f"capture of {p} at {anchor}") for p, x in captures.items()
    }
    non_finite = {p: _new_non_finite(arrays[p], fp64) for p in member}
    cell = _Cell(params, anchor, metrics, fp64, non_finite, introduced or {})
    deviations: list[Deviation] = []
    noise_floor: Mapping[str, float] | None = None
    consensus_vs_fp64: Mapping[str, float] = {}

    def floor_of(chosen: list[Metric]) -> dict[str, float]:
        """The fp32 reference against fp64 when it is not among the fp32 participants."""
        fp32 = _as_float64(fp32_reference, fp64.shape, f"fp32 reference at {anchor}")
        return _against(chosen, _transformed(chosen, fp32), _transformed(chosen, fp64))

    if len(fp32_names) >= 2:
        group = {p: arrays[p] for p in fp32_names}
        own_floor = reference_name in fp32_names

        def fp32_candidate(first: AnchorMetrics) -> bool:
            floor = first.vs_fp64[reference_name] if own_floor else floor_of(cell.verdict)
            return cell.candidate(
                FP32, {p: first.vs_consensus[p] for p in fp32_names}, floor, reference_name
            )

        # the primary metric, and the others where a member is a candidate: one blocked pass
        measured = cell.measure(group, fp32_candidate)
        deviations += [
            Deviation(
                p,
                anchor,
                input_id,
                measured.vs_consensus[p],
                measured.vs_fp64[p],
                non_finite[p],
            )
            for p in fp32_names
        ]
        consensus_vs_fp64 = measured.consensus_vs_fp64
        if own_floor:
            noise_floor = measured.vs_fp64[reference_name]
        else:  # the floor's metrics are the measured ones
            noise_floor = floor_of([get_metric(n) for n in consensus_vs_fp64])
    if noise_floor is None:  # no fp32 population: the floor as the scope computes metrics
        noise_floor = floor_of(cell.metrics if cell.everywhere else cell.verdict)
    class_floors: dict[str, Mapping[str, float]] = {}
    for judged in dict.fromkeys(c for c in member.values() if c != FP32):
        ideal = ideal_reference(judged)
        if ideal not in arrays:  # no ideal reference: the class is not judged
            continue
        names = [p for p, c in member.items() if c == judged]
        group = {**{p: arrays[p] for p in names}, ideal: arrays[ideal]}

        def class_candidate(
            first: AnchorMetrics, judged: str = judged, names: list[str] = names, ideal: str = ideal
        ) -> bool:
            distances = {p: first.vs_fp64[p] for p in names}
            return cell.candidate(judged, distances, first.vs_fp64[ideal], ideal)

        vs_fp64 = cell.measure(group, class_candidate).vs_fp64
        class_floors[judged] = vs_fp64[ideal]
        deviations += [
            Deviation(p, anchor, input_id, vs_fp64[p], vs_fp64[p], non_finite[p], judged)
            for p in names
        ]
    return AnchorEvidence(
        anchor,
        input_id,
        tuple(deviations),
        dict(noise_floor),
        len(fp32_names),
        consensus_vs_fp64,
        class_floors,
    )


@dataclass(frozen=True)
class _Cell:
    """One (anchor, input) of :func:`assess`: which metrics to compute for a group of
    participants there, and whether one of them is a candidate.
    """

    params: OracleParams
    anchor: str
    metrics: list[Metric]
    fp64: np.ndarray
    non_finite: Mapping[str, int]
    introduced: Mapping[str, float]

    @property
    def everywhere(self) -> bool:
        """Whether every metric is computed at every cell."""
        return self.params.metrics_scope == METRICS_ALL or len(self.metrics) == 1

    @property
    def verdict(self) -> list[Metric]:
        """The verdict path's metrics: the primary alone."""
        return [get_metric(self.params.primary_metric)]

    def measure(
        self, group: Mapping[str, np.ndarray], candidate: Callable[[AnchorMetrics], bool]
    ) -> AnchorMetrics:
        """The group's verdict path, then, in the same pass, the other metrics when
        ``candidate`` says so of it (at once when every metric is computed everywhere):
        the numbers of one pass with every metric either way.
        """
        if self.everywhere:
            return measure_anchor(self.metrics, group, self.fp64)
        others = self.metrics[1:]  # the primary is first (OracleParams.metric_names)

        def more(first: AnchorMetrics) -> list[Metric]:
            return others if candidate(first) else []

        return measure_anchor(self.verdict, group, self.fp64, more)

    def candidate(
        self,
        judged: str,
        deviations: Mapping[str, Mapping[str, float]],
        floor: Mapping[str, float],
        reference: str | None,
    ) -> bool:
        """Whether a member of class ``judged`` may be a finding here (the per-input test of
        :func:`noise_candidates`): ``deviations`` are the members' primary numbers, ``floor``
        the class's noise floor, ``reference`` the participant whose introduced error is
        the floor of the introduced errors.
        """
        params, primary = self.params, self.params.primary_metric
        factor = params.factor_of(judged, self.anchor)
        introduced_floor = self.introduced.get(reference or "", math.nan)
        introduced_factor = params.factor_of(judged, self.anchor, introduced=True)
        for p, values in deviations.items():
            if self.non_finite.get(p) or _above_noise(
                params, primary, values[primary], floor[primary], factor
            ):
                return True
            stage = self.introduced.get(p, math.nan)
            if not math.isnan(stage) and _above_noise(
                params, INTRODUCED_METRIC, stage, introduced_floor, introduced_factor
            ):
                return True
        return False


@dataclass(frozen=True)
class _Population:
    median: float
    mad: float


def _population(values: Iterable[float]) -> _Population:
    """Median and MAD of the non-NaN values (inf values count; NaN ones do not)."""
    v = np.array([x for x in values if not math.isnan(x)], dtype=np.float64)
    if v.size == 0:
        return _Population(math.nan, math.nan)
    median = float(np.median(v))
    with np.errstate(invalid="ignore"):  # inf − inf where the median itself is inf
        spread = np.where(v == median, 0.0, np.abs(v - median))
    return _Population(median, float(np.median(spread)))


_NOBODY = _Population(math.nan, math.nan)
"""The population of a test that needs none (the noise test alone)."""


def _judge_metric(
    name: str,
    value: float,
    population: _Population,
    noise_floor: float,
    resolution: float,
    params: OracleParams,
    factor: float | None = None,
) -> MetricJudgement:
    """Judge one value; ``factor`` (default ``params.noise_factor``) times the floor is the
    noise threshold.
    """
    scale = max(MAD_TO_SIGMA * population.mad, params.mad_floor_rel * population.median, resolution)
    outlier_threshold = population.median + params.outlier_k * scale
    # an unusable (NaN) floor falls back to the metric's resolution
    floor = resolution if math.isnan(noise_floor) else max(noise_floor, resolution)
    noise_threshold = (params.noise_factor if factor is None else factor) * floor
    return MetricJudgement(
        metric=name,
        value=value,
        population_median=population.median,
        mad=population.mad,
        scale=scale,
        outlier_threshold=outlier_threshold,
        noise_floor=noise_floor,
        noise_threshold=noise_threshold,
        outlier=bool(value > outlier_threshold),
        above_noise=bool(value > noise_threshold),
    )


def _above_noise(
    params: OracleParams, name: str, value: float, floor: float, factor: float
) -> bool:
    """Whether ``value`` of metric ``name`` exceeds ``factor`` times ``floor`` (the noise test
    of :func:`_judge_metric`, which needs no population).
    """
    resolution = resolutions(params.resolution).get(name, 0.0)
    return _judge_metric(name, value, _NOBODY, floor, resolution, params, factor).above_noise


def _judge_introduced(
    introduced: Mapping[tuple[str, str], float],
    floor: Mapping[str, float],
    params: OracleParams,
    factor: float | None = None,
) -> dict[tuple[str, str], MetricJudgement]:
    """Judge every introduced error at one anchor against its population and floor."""
    population = _population(introduced.values())
    resolution = resolutions(params.resolution)[INTRODUCED_METRIC]
    return {
        (p, i): _judge_metric(
            INTRODUCED_METRIC,
            value,
            population,
            floor.get(i, math.nan),
            resolution,
            params,
            factor,
        )
        for (p, i), value in introduced.items()
        if not math.isnan(value)
    }


def _group(d: Deviation, e: AnchorEvidence) -> tuple[str, bool]:
    """The population a deviation belongs to: its class, and whether the fp32 class
    degenerated to a pair on its input.
    """
    return d.precision, d.precision == FP32 and e.pairwise


def _introduced_by_class(
    evidence: Sequence[AnchorEvidence],
    introduced: Mapping[tuple[str, str], float],
    introduced_floor: Mapping[str, float],
) -> dict[str, tuple[dict[tuple[str, str], float], dict[str, float]]]:
    """``{class: (its members' introduced errors, {input: its floor})}``: the fp32 class
    holds every participant that is not a reduced-precision member or an ideal reference
    (the fp32 reference's errors are its floor); a reduced class's floor is its ideal
    reference's introduced error.
    """
    of = {d.participant: d.precision for e in evidence for d in e.deviations}
    groups: dict[str, tuple[dict[tuple[str, str], float], dict[str, float]]] = {
        FP32: ({}, dict(introduced_floor))
    }
    for (p, i), value in introduced.items():
        if ideal_class(p) is not None:
            continue
        judged = of.get(p, FP32)
        if judged not in groups:
            ideal = ideal_reference(judged)
            floor = {j: v for (q, j), v in introduced.items() if q == ideal}
            groups[judged] = ({}, floor)
        groups[judged][0][(p, i)] = value
    return groups


def judge_anchor(
    evidence: Iterable[AnchorEvidence],
    params: OracleParams | None = None,
    *,
    introduced: Mapping[tuple[str, str], float] | None = None,
    introduced_floor: Mapping[str, float] | None = None,
) -> tuple[Verdict, ...]:
    """Phase 2: judge every deviation at one anchor against its population.

    Args:
        evidence: Phase 1 records of one anchor, one per input.
        params: Oracle parameters.
        introduced: Stage isolation: ``{(participant, input): introduced error}`` at this
            anchor (relative L2 of the isolated stage output vs fp64), the ideal
            references' included; ``None`` when isolation did not run.
        introduced_floor: ``{input: the fp32 reference's introduced error}``.

    Returns:
        One verdict per (participant, input), in the order of ``evidence``.

    Raises:
        UsageError: When the evidence mixes anchors.
    """
    params = params or OracleParams()
    evidence = list(evidence)
    if len({e.anchor for e in evidence}) > 1:
        anchors = sorted({e.anchor for e in evidence})
        raise UsageError(f"judge_anchor got several anchors: {anchors}")
    names = params.metric_names()
    resolution = resolutions(params.resolution)
    # populations per (class, pairwise mode); only the fp32 class can be pairwise
    grouped: dict[tuple[str, bool], list[Deviation]] = {}
    for e in evidence:
        for d in e.deviations:
            grouped.setdefault(_group(d, e), []).append(d)
    populations = {  # a metric a cell did not compute is absent there (module docstring)
        group: {n: _population(d.metrics.get(n, math.nan) for d in members) for n in names}
        for group, members in grouped.items()
    }
    primary = params.primary_metric
    pairwise = any(e.pairwise for e in evidence)
    anchor = evidence[0].anchor if evidence else ""
    sizes = {  # members of each class (a class's deviations on one input)
        c: max(sum(d.precision == c for d in e.deviations) for e in evidence)
        for c in {d.precision for e in evidence for d in e.deviations}
    }
    isolation: dict[tuple[str, str], MetricJudgement] = {}
    if introduced:
        groups = _introduced_by_class(evidence, introduced, introduced_floor or {})
        for judged, (values, floor) in groups.items():
            if judged == FP32 and pairwise:
                continue
            factor = params.factor_of(judged, anchor, introduced=True)
            isolation.update(_judge_introduced(values, floor, params, factor))
    verdicts = []
    for e in evidence:
        for d in e.deviations:
            fp32 = d.precision == FP32
            paired = _group(d, e)[1]
            floors = e.noise_floor if fp32 else e.class_floors[d.precision]
            stage = isolation.get((d.participant, e.input_id))
            judged = {
                n: _judge_metric(
                    n,
                    d.metrics[n],
                    populations[(d.precision, paired)][n],
                    floors.get(n, math.nan),
                    resolution.get(n, 0.0),
                    params,
                    params.factor_of(d.precision, e.anchor) if n == primary or not fp32 else None,
                )
                for n in names
                if n in d.metrics
            }
            # a reduced class of fewer than three members is judged by its floor alone
            small = not fp32 and sizes.get(d.precision, 0) < 3
            exceeded = set()
            if judged[primary].outlier:
                exceeded.add(Criterion.OUTLIER)
            if judged[primary].above_noise:
                exceeded.add(Criterion.ABOVE_NOISE)
            if d.non_finite:
                exceeded.add(Criterion.NON_FINITE)
            if stage is not None and (stage.outlier or small) and stage.above_noise:
                exceeded.add(Criterion.INTRODUCED)
            if paired:
                other = next(o for o in e.deviations if o is not d and o.precision == FP32)
                if d.vs_fp64[primary] > other.vs_fp64[primary]:
                    exceeded.add(Criterion.FARTHER_FROM_FP64)
            if paired:
                required = PAIRWISE_CRITERIA
            else:
                required = CLASS_FLOOR_CRITERIA if small else POPULATION_CRITERIA
            verdicts.append(
                Verdict(
                    participant=d.participant,
                    anchor=e.anchor,
                    input_id=e.input_id,
                    primary=judged[primary],
                    secondary={n: j for n, j in judged.items() if n != primary},
                    vs_fp64=dict(d.vs_fp64),
                    consensus_vs_fp64=dict(e.consensus_vs_fp64 if fp32 else floors),
                    pairwise=paired,
                    non_finite=d.non_finite,
                    required=required,
                    exceeded=frozenset(exceeded),
                    introduced=stage,
                    precision=d.precision,
                )
            )
    return tuple(verdicts)


def noise_candidates(
    evidence: Iterable[AnchorEvidence],
    params: OracleParams | None = None,
    *,
    introduced: Mapping[tuple[str, str], float] | None = None,
    introduced_floor: Mapping[str, float] | None = None,
) -> set[tuple[str, str]]:
    """The (participant, input) pairs at one anchor that may be findings, judged per input.

    :func:`judge_anchor` needs every input's evidence (its populations span them); this
    needs one input's alone, so a run that analyses its inputs a chunk at a time
    (:mod:`anpred.pipeline.chunks`) knows which captures to keep before the rest exist.
    A pair is a candidate when its primary metric is above the noise threshold (required
    by both criteria sets, :data:`POPULATION_CRITERIA` and :data:`PAIRWISE_CRITERIA`), or
    it has non-finite values, or its introduced error is above its noise threshold (each
    sufficient criterion needs that too). The thresholds are :func:`_judge_metric`'s own,
    so every finding :func:`judge_anchor` makes on the same evidence and parameters is a
    candidate; most candidates are not findings (they still have to be outliers).
    """
    params = params or OracleParams()
    primary = params.primary_metric
    found: set[tuple[str, str]] = set()
    evidence = list(evidence)
    groups = _introduced_by_class(evidence, introduced or {}, introduced_floor or {})
    for e in evidence:
        for d in e.deviations:
            floor = e.noise_floor if d.precision == FP32 else e.class_floors[d.precision]
            factor = params.factor_of(d.precision, e.anchor)
            if d.non_finite or _above_noise(
                params, primary, d.metrics[primary], floor[primary], factor
            ):
                found.add((d.participant, e.input_id))
        anchor = e.anchor
        for judged_class, (values, floor) in groups.items():
            factor = params.factor_of(judged_class, anchor, introduced=True)
            for (p, i), value in values.items():
                if i != e.input_id or math.isnan(value):
                    continue
                if _above_noise(params, INTRODUCED_METRIC, value, floor.get(i, math.nan), factor):
                    found.add((p, i))
    return found


@register_method("anpred_oracle")
def consensus_oracle(
    outputs: Mapping[str, np.ndarray],
    fp32_reference: np.ndarray,
    fp64_reference: np.ndarray,
    *,
    params: OracleParams | None = None,
) -> dict[str, Verdict]:
    """Judge one input's outputs with the oracle, behind the shared method interface.

    The population is then the participants' deviations for this one input; over a whole
    run use :func:`assess` and :func:`judge_anchor`, whose population spans all inputs.
    """
    evidence = assess("output", "0", outputs, fp32_reference, fp64_reference, params=params)
    return {v.participant: v for v in judge_anchor([evidence], params)}
