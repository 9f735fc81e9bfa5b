"""The drill-down's judgement: every operator anchor of its jobs judged by the oracle.

:func:`operator_verdicts` reads the drill jobs' captures (:mod:`anpred.pipeline.drill`
runs them; ``anpred repro``'s trials run their own), aligns each operator's output to the
fp64 reference's, assesses it against the population of participants and judges it with
the run's oracle, per input; each participant's introduced error per operator (its
isolated capture against fp64) goes with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from anpred.analysis.alignment import AlignmentError, align
from anpred.analysis.oracle import AnchorEvidence, OracleParams, assess, judge_anchor
from anpred.analysis.verdict import Verdict
from anpred.localization.stage_error import relative_l2
from anpred.participants import REFERENCE32, REFERENCE64, precision_classes
from anpred.store import CAPTURE, ISOLATED, RunStore


def _evidence(
    drill_root: Path,
    names: Sequence[str],
    keys: Sequence[str],
    input_ids: Sequence[str],
    params: OracleParams,
) -> tuple[dict[str, list[AnchorEvidence]], dict[str, dict[tuple[str, str], float]]]:
    """Align and assess every operator anchor, one input at a time; and each
    participant's introduced error per operator (its isolated capture vs fp64).

    Lighter than the run's pass (:func:`anpred.pipeline.evidence.collect`): no dimension
    records, no baselines; only the metrics ``params`` names.
    """
    store = RunStore(drill_root)
    classes = precision_classes(names)  # each judged in its class, as in the run
    evidence: dict[str, list[AnchorEvidence]] = {k: [] for k in keys}
    introduced: dict[str, dict[tuple[str, str], float]] = {k: {} for k in keys}
    for input_id in input_ids:
        ref = store.participant(REFERENCE64).open_capture(input_id, CAPTURE)
        if ref is None:
            continue
        opened = {p: store.participant(p).open_capture(input_id, CAPTURE) for p in names}
        isolated = {p: store.participant(p).open_capture(input_id, ISOLATED) for p in names}
        try:
            for key in keys:
                fp64 = ref[key].astype(np.float64)
                aligned = {}
                for p, capture in opened.items():
                    if capture is None:
                        continue
                    try:
                        aligned[p] = align(
                            capture[key], fp64.shape, capture.layout(key), reference=fp64
                        ).values
                        iso = isolated.get(p)
                        if iso is not None:
                            xi = align(iso[key], fp64.shape, iso.layout(key)).values
                            introduced[key][(p, input_id)] = relative_l2(xi, fp64)
                    except AlignmentError:
                        continue
                if REFERENCE32 in aligned and len(aligned) >= 2:
                    evidence[key].append(
                        assess(
                            key,
                            input_id,
                            aligned,
                            aligned[REFERENCE32],
                            fp64,
                            params=params,
                            classes=classes,
                        )
                    )
        finally:
            ref.close()
            for c in [*opened.values(), *isolated.values()]:
                if c is not None:
                    c.close()
    return evidence, introduced


def operator_verdicts(
    drill_root: Path,
    names: Sequence[str],
    keys: Sequence[str],
    input_ids: Sequence[str],
    params: OracleParams,
) -> dict[tuple[str, str, str], Verdict]:
    """Every (participant, operator anchor, input) of a drill-down's captures judged by the
    oracle, each operator against the other participants' (also what ``anpred repro``'s
    trials judge).

    Args:
        drill_root: The run directory of the drill jobs (``drill/`` or a trial's folder).
        names: The participants to judge (their jobs finished).
        keys: The operator anchors, in graph order.
        input_ids: The inputs.
        params: Oracle parameters (with per-operator calibration factors, if any).

    Returns:
        ``(participant, anchor, input id)`` → the oracle's verdict.
    """
    evidence, introduced = _evidence(drill_root, names, keys, input_ids, params)
    verdicts = {}
    for key in keys:
        if not evidence[key]:
            continue
        floor = {i: x for (p, i), x in introduced[key].items() if p == REFERENCE32}
        for v in judge_anchor(
            evidence[key], params, introduced=introduced[key], introduced_floor=floor
        ):
            verdicts[(v.participant, v.anchor, v.input_id)] = v
    return verdicts
