"""Per-anchor noise thresholds calibrated from the spread of legitimate fp32 implementations.

The fixed rule of the oracle flags a deviation above ``NOISE_FACTOR`` (10) times the fp64
noise floor at every anchor of every model. How far legitimate fp32 implementations really
spread around their consensus differs per anchor and per model, so a fixed factor is too
strict at some anchors (a fault at 2-9 times the floor is missed) and could be too lax at
others. A **calibration** replaces the factor by one per anchor, learnt from a clean run on
*calibration inputs* (inputs the judged run does not use) and stored with the runs it
judges (``docs/oracle.md``).

**The quantity.** For a clean participant ``p`` at anchor ``a`` on calibration input ``i``,
the *noise ratio* is ``r = max(d, res) / max(f, res)``: its primary-metric deviation ``d``
from the consensus over the fp64 noise floor ``f`` (the fp32 reference's distance from the
fp64 reference on the same input), ``res`` the metric's resolution. The fixed rule is
"finding when r > 10"; the calibrated one is "finding when r > T_a". Stage isolation gets
its own factor per anchor from the ratios of every clean participant's introduced error to
the fp32 reference's.

**The rule** (:data:`RULE`). The log-ratios ``x = ln r`` of one anchor (participants ×
calibration inputs, ``n`` values) are taken as a normal sample: fp32 rounding errors are
sums of many small independent terms, and their ratio to a floor made of the same terms is
positive and multiplicative in nature. Where the sample is not log-normal (libraries that
compute bit-identical anchors form a cluster of equal ratios) its standard deviation grows
and the bound gets more conservative, not less. ``T_a`` is the one-sided upper **tolerance bound**
``exp(mean + k · sd)`` with ``k`` the normal tolerance factor for coverage ``1 − α`` at
confidence ``γ`` (``k = t'_γ(n − 1, z_{1−α} √n) / √n``, the noncentral-t quantile; Krishnamoorthy
& Mathew, *Statistical Tolerance Regions*, 2009, §2.2): with probability ``γ`` over the
calibration sample, at most a fraction ``α`` of clean cells at that anchor exceed ``T_a``.
``α`` is the stated **false-alarm target per cell** (:data:`FALSE_ALARM_PER_CELL`); for a
run with ``C`` judged (participant, anchor, input) cells the expected number of false cells
is at most ``α · C`` and the chance of any is at most ``α · C`` (union bound), e.g. 8.4 %
for resnet50's 7 anchors × 6 participants × 2 inputs. ``T_a`` never goes below
:data:`MIN_FACTOR` (a finding stays above the noise floor itself, as ``DESIGN.md``
requires) and an anchor with fewer than :data:`MIN_SAMPLES` finite ratios keeps the fixed
factor (the fallback the summary names).

**Precision classes.** A reduced-precision class (``bf16``...) is calibrated the same way
from its clean members' ratios to its own floor, the ideal reference's distance from fp64
(:mod:`anpred.analysis.oracle`): :attr:`Calibration.classes` holds its factors per anchor;
a class or anchor without one keeps ``CLASS_FACTOR``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anpred.errors import UsageError

RULE = "lognormal-tolerance"
"""Name of the calibrated rule (written in summaries as ``oracle.threshold_rule``)."""

FALSE_ALARM_PER_CELL = 1e-3
"""α: the stated share of clean (participant, anchor, input) cells a calibrated threshold
may flag (coverage 1 − α of the clean population). The issue's budget is 1 % false cells;
10x below it leaves room for what a small calibration sample cannot see."""

CONFIDENCE = 0.9
"""γ: the probability, over calibration samples, that the bound covers 1 − α of clean cells."""

MIN_SAMPLES = 6
"""Fewer finite ratios at an anchor: no calibrated threshold there (fixed factor)."""

MIN_FACTOR = 1.0
"""A calibrated factor is at least this: a finding stays above the noise floor itself."""

VERSION = 1
"""Version of the calibration rule; a stored calibration of another version is not used."""


def tolerance_factor(n: int, false_alarm: float, confidence: float) -> float:
    """One-sided normal tolerance factor ``k`` (coverage ``1 − false_alarm``).

    With ``n`` normal samples of mean ``m`` and standard deviation ``s``, the bound
    ``m + k·s`` exceeds the ``1 − false_alarm`` quantile of the distribution with
    probability ``confidence``.

    Raises:
        UsageError: ``n < 2`` or probabilities outside (0, 1).
    """
    if n < 2:
        raise UsageError(f"a tolerance bound needs at least 2 samples, got {n}")
    if not (0 < false_alarm < 1 and 0 < confidence < 1):
        raise UsageError(
            f"false-alarm target and confidence lie in (0, 1), got {false_alarm}, {confidence}"
        )
    from scipy.stats import nct, norm

    z = float(norm.ppf(1 - false_alarm))
    return float(nct.ppf(confidence, df=n - 1, nc=z * math.sqrt(n)) / math.sqrt(n))


@dataclass(frozen=True)
class AnchorThreshold:
    """The calibrated factor of one anchor and the sample it came from.

    Attributes:
        factor: ``T_a``: a deviation is above noise when it exceeds ``factor`` times the
            noise floor (``None``: too few samples, the fixed factor applies).
        n: Finite ratios in the sample.
        mean_log: Mean of the log-ratios.
        sd_log: Standard deviation of the log-ratios (``ddof=1``).
        max_ratio: Largest ratio in the sample.
    """

    factor: float | None
    n: int
    mean_log: float | None = None
    sd_log: float | None = None
    max_ratio: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return dict(vars(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AnchorThreshold:
        """Read the JSON form."""
        return cls(
            data.get("factor"),
            int(data["n"]),
            data.get("mean_log"),
            data.get("sd_log"),
            data.get("max_ratio"),
        )


def fit_threshold(
    ratios: Iterable[float],
    false_alarm: float = FALSE_ALARM_PER_CELL,
    confidence: float = CONFIDENCE,
) -> AnchorThreshold:
    """The tolerance bound of one anchor's noise ratios (see the module docstring)."""
    r = np.array([x for x in ratios if math.isfinite(x) and x > 0], dtype=np.float64)
    if r.size < MIN_SAMPLES:
        return AnchorThreshold(None, int(r.size))
    x = np.log(r)
    mean, sd = float(x.mean()), float(x.std(ddof=1))
    k = tolerance_factor(int(r.size), false_alarm, confidence)
    factor = max(MIN_FACTOR, math.exp(mean + k * sd))
    return AnchorThreshold(factor, int(r.size), mean, sd, float(r.max()))


def noise_ratio(deviation: float, floor: float, resolution: float) -> float:
    """``max(deviation, resolution) / max(floor, resolution)`` (NaN when either is NaN)."""
    if math.isnan(deviation) or math.isnan(floor):
        return math.nan
    return max(deviation, resolution) / max(floor, resolution, 1e-300)


@dataclass(frozen=True)
class ClassThresholds:
    """The calibrated factors of one reduced-precision class.

    Attributes:
        anchors: ``{anchor: threshold}`` of its members' distances from fp64 over the ideal
            reference's.
        introduced: ``{anchor: threshold}`` of their introduced errors over the ideal's.
    """

    anchors: Mapping[str, AnchorThreshold] = field(default_factory=dict)
    introduced: Mapping[str, AnchorThreshold] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "anchors": {a: t.to_dict() for a, t in self.anchors.items()},
            "introduced": {a: t.to_dict() for a, t in self.introduced.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClassThresholds:
        """Read the JSON form."""
        return cls(
            {a: AnchorThreshold.from_dict(t) for a, t in data.get("anchors", {}).items()},
            {a: AnchorThreshold.from_dict(t) for a, t in data.get("introduced", {}).items()},
        )


@dataclass(frozen=True)
class Calibration:
    """Per-anchor factors for the noise criteria of one model and participant set.

    Attributes:
        anchors: ``{anchor: threshold}`` for deviations from the consensus.
        introduced: ``{anchor: threshold}`` for stage isolation's introduced errors.
        metric: The primary metric the ratios were measured with.
        participants: The clean participants whose spread was measured.
        inputs: The calibration inputs (a judged run must not reuse them).
        model: What the calibration belongs to (model name and weights).
        false_alarm: α.
        confidence: γ.
        rule: :data:`RULE`.
        version: :data:`VERSION`.
        source: Where the judged run got it (``cache:PATH``, ``file:PATH``; empty when it
            was attached by ``anpred eval`` or by hand).
        classes: ``{reduced precision class: its thresholds}`` (ratios to the class's
            ideal reference).
    """

    anchors: Mapping[str, AnchorThreshold]
    introduced: Mapping[str, AnchorThreshold] = field(default_factory=dict)
    metric: str = "rel_l2"
    participants: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    model: str = ""
    false_alarm: float = FALSE_ALARM_PER_CELL
    confidence: float = CONFIDENCE
    rule: str = RULE
    version: int = VERSION
    source: str = ""
    classes: Mapping[str, ClassThresholds] = field(default_factory=dict)

    def class_factor(self, precision: str, anchor: str, introduced: bool = False) -> float | None:
        """A reduced class's calibrated factor at ``anchor`` (``None``: the fixed one)."""
        found = self.classes.get(precision)
        if found is None:
            return None
        entry = (found.introduced if introduced else found.anchors).get(anchor)
        return entry.factor if entry else None

    def factor(self, anchor: str) -> float | None:
        """The calibrated factor of ``anchor``'s deviations (``None``: fixed rule)."""
        entry = self.anchors.get(anchor)
        return entry.factor if entry else None

    def introduced_factor(self, anchor: str) -> float | None:
        """The calibrated factor of ``anchor``'s introduced errors (``None``: fixed rule)."""
        entry = self.introduced.get(anchor)
        return entry.factor if entry else None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``calibration.json`` in a run directory)."""
        record: dict[str, Any] = {
            "rule": self.rule,
            "version": self.version,
            "metric": self.metric,
            "false_alarm": self.false_alarm,
            "confidence": self.confidence,
            "model": self.model,
            "participants": list(self.participants),
            "inputs": list(self.inputs),
            "anchors": {a: t.to_dict() for a, t in self.anchors.items()},
            "introduced": {a: t.to_dict() for a, t in self.introduced.items()},
        }
        if self.classes:
            record["classes"] = {c: t.to_dict() for c, t in self.classes.items()}
        if self.source:
            record["source"] = self.source
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        """Read the JSON form.

        Raises:
            UsageError: Another rule or version, or a malformed record.
        """
        if data.get("rule") != RULE or data.get("version") != VERSION:
            raise UsageError(
                f"calibration of rule {data.get('rule')!r} version {data.get('version')!r}; "
                f"this anpred uses {RULE!r} version {VERSION} (calibrate again)"
            )
        try:
            return cls(
                anchors={a: AnchorThreshold.from_dict(t) for a, t in data["anchors"].items()},
                introduced={
                    a: AnchorThreshold.from_dict(t) for a, t in data.get("introduced", {}).items()
                },
                metric=str(data["metric"]),
                participants=tuple(data.get("participants", ())),
                inputs=tuple(data.get("inputs", ())),
                model=str(data.get("model", "")),
                false_alarm=float(data["false_alarm"]),
                confidence=float(data["confidence"]),
                source=str(data.get("source", "")),
                classes={
                    c: ClassThresholds.from_dict(t) for c, t in data.get("classes", {}).items()
                },
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise UsageError(f"malformed calibration record ({err.__class__.__name__})") from None

    def summary(self) -> dict[str, Any]:
        """The compact form a run's summary carries: rule, target and factor per anchor (and
        the calibration's source, when it came from the cache or a file).
        """
        compact: dict[str, Any] = {
            "false_alarm_per_cell": self.false_alarm,
            "confidence": self.confidence,
            "inputs": list(self.inputs),
            "participants": list(self.participants),
            "factor": {a: t.factor for a, t in self.anchors.items()},
            "introduced_factor": {a: t.factor for a, t in self.introduced.items()},
        }
        if self.classes:
            compact["class_factor"] = {
                c: {a: t.factor for a, t in ct.anchors.items()} for c, ct in self.classes.items()
            }
        if self.source:
            compact["source"] = self.source
        return compact


def calibrate_rows(
    rows: Sequence[Mapping[str, Any]],
    reference: str,
    *,
    metric: str = "rel_l2",
    resolution: float,
    false_alarm: float = FALSE_ALARM_PER_CELL,
    confidence: float = CONFIDENCE,
    model: str = "",
) -> Calibration:
    """Calibrate from the deviation rows of a clean run (``deviations.parquet``).

    Args:
        rows: One row per (participant, anchor, input) with ``metric``, ``noise_floor``,
            ``introduced``, ``introduced_floor``, ``precision`` and ``pairwise`` (the
            columns the analysis writes). Every participant in them must be a legitimate
            implementation of its precision class.
        reference: The fp32 reference participant (its introduced error is the floor of
            the introduced errors; its own ratio, 1 by construction, is left out).
        metric: The primary metric.
        resolution: The metric's resolution.
        false_alarm: α.
        confidence: γ.
        model: A label of what was calibrated.

    Raises:
        UsageError: When the rows are pairwise (two participants: no population to learn).
    """
    if any(r.get("pairwise") for r in rows):
        raise UsageError("calibration needs three or more clean participants, not a pair")
    fp32 = [r for r in rows if _class(r) == "fp32"]
    ratios: dict[str, list[float]] = {}
    floor_introduced = {
        (r["anchor"], r["input"]): r.get("introduced")
        for r in fp32
        if r["participant"] == reference
    }
    introduced: dict[str, list[float]] = {}
    for r in fp32:
        value, floor = r.get(metric), r.get("noise_floor")
        anchor = r["anchor"]
        ratios.setdefault(anchor, []).append(noise_ratio(_num(value), _num(floor), resolution))
        if r["participant"] != reference:
            own, ref = r.get("introduced"), floor_introduced.get((anchor, r["input"]))
            introduced.setdefault(anchor, []).append(noise_ratio(_num(own), _num(ref), resolution))
    classes: dict[str, ClassThresholds] = {}
    for judged in dict.fromkeys(_class(r) for r in rows if _class(r) != "fp32"):
        members = [r for r in rows if _class(r) == judged]
        deviation: dict[str, list[float]] = {}
        stage: dict[str, list[float]] = {}
        for r in members:
            deviation.setdefault(r["anchor"], []).append(
                noise_ratio(_num(r.get(metric)), _num(r.get("noise_floor")), resolution)
            )
            stage.setdefault(r["anchor"], []).append(
                noise_ratio(_num(r.get("introduced")), _num(r.get("introduced_floor")), resolution)
            )
        classes[judged] = ClassThresholds(
            {a: fit_threshold(v, false_alarm, confidence) for a, v in deviation.items()},
            {a: fit_threshold(v, false_alarm, confidence) for a, v in stage.items()},
        )
    return Calibration(
        anchors={a: fit_threshold(v, false_alarm, confidence) for a, v in ratios.items()},
        introduced={a: fit_threshold(v, false_alarm, confidence) for a, v in introduced.items()},
        metric=metric,
        participants=tuple(dict.fromkeys(str(r["participant"]) for r in rows)),
        inputs=tuple(dict.fromkeys(str(r["input"]) for r in rows)),
        model=model,
        false_alarm=false_alarm,
        confidence=confidence,
        classes=classes,
    )


def _class(row: Mapping[str, Any]) -> str:
    """A deviation row's precision class (rows written before classes existed: fp32)."""
    return str(row.get("precision") or "fp32")


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)
