"""Phase 2 of the oracle: one anchor judged over every input (:func:`judge_anchor`), the
per-input candidates (:func:`noise_candidates`), and the oracle behind the shared method
interface (:func:`consensus_oracle`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from anpred.analysis.methods import register_method
from anpred.analysis.metrics import resolutions
from anpred.analysis.oracle.evidence import AnchorEvidence, Deviation, assess
from anpred.analysis.oracle.params import INTRODUCED_METRIC, OracleParams
from anpred.analysis.oracle.rules import _above_noise, _judge_metric, _Population, _population
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
    populations = _populations(evidence, names)
    primary = params.primary_metric
    sizes = _class_sizes(evidence)
    isolation = _isolation(evidence, params, introduced or {}, introduced_floor or {})
    verdicts = []
    for e in evidence:
        for d in e.deviations:
            fp32 = d.precision == FP32
            paired = _group(d, e)[1]
            floors = e.noise_floor if fp32 else e.class_floors[d.precision]
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
            stage = isolation.get((d.participant, e.input_id))
            verdicts.append(_verdict(d, e, judged, primary, stage, small))
    return tuple(verdicts)


def _populations(
    evidence: Sequence[AnchorEvidence], names: Sequence[str]
) -> dict[tuple[str, bool], dict[str, _Population]]:
    """Each metric's population per (class, pairwise mode); only the fp32 class can be
    pairwise. A metric a cell did not compute is absent there (module docstring).
    """
    grouped: dict[tuple[str, bool], list[Deviation]] = {}
    for e in evidence:
        for d in e.deviations:
            grouped.setdefault(_group(d, e), []).append(d)
    return {
        group: {n: _population(d.metrics.get(n, math.nan) for d in members) for n in names}
        for group, members in grouped.items()
    }


def _class_sizes(evidence: Sequence[AnchorEvidence]) -> dict[str, int]:
    """Members of each class (the most of its deviations on one input)."""
    return {
        c: max(sum(d.precision == c for d in e.deviations) for e in evidence)
        for c in {d.precision for e in evidence for d in e.deviations}
    }


def _isolation(
    evidence: Sequence[AnchorEvidence],
    params: OracleParams,
    introduced: Mapping[tuple[str, str], float],
    introduced_floor: Mapping[str, float],
) -> dict[tuple[str, str], MetricJudgement]:
    """Each (participant, input)'s introduced error judged within its class (none without
    stage isolation; the fp32 class is not judged when it is a pair).
    """
    isolation: dict[tuple[str, str], MetricJudgement] = {}
    if not introduced:
        return isolation
    pairwise = any(e.pairwise for e in evidence)
    anchor = evidence[0].anchor if evidence else ""
    groups = _introduced_by_class(evidence, introduced, introduced_floor)
    for judged, (values, floor) in groups.items():
        if judged == FP32 and pairwise:
            continue
        factor = params.factor_of(judged, anchor, introduced=True)
        isolation.update(_judge_introduced(values, floor, params, factor))
    return isolation


def _verdict(
    d: Deviation,
    e: AnchorEvidence,
    judged: Mapping[str, MetricJudgement],
    primary: str,
    stage: MetricJudgement | None,
    small: bool,
) -> Verdict:
    """One deviation's verdict: the criteria it exceeds and the set its mode requires."""
    fp32 = d.precision == FP32
    paired = _group(d, e)[1]
    floors = e.noise_floor if fp32 else e.class_floors[d.precision]
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
    return Verdict(
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
