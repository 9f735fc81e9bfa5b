"""Scoring a run against the fault injected into it (the ground truth).

The injection itself is planned and recorded by :mod:`anpred.inject`; here the run's typed
:class:`~anpred.store.summary.Summary` is read for what the oracle, localization and the
output-level baselines made of it: detection, stage and library localization, false
positives. Reading the typed summary (not ``.get`` chains on its JSON) means a renamed or
missing key fails when the summary is loaded instead of counting a fault as undetected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anpred.inject.spec import FaultSpec
from anpred.store.summary import Summary


def detection(summary: Summary, participant: str, stage: str) -> dict[str, Any]:
    """What the analysis reported about ``participant``, scored against ``stage``.

    Args:
        summary: The run's summary.
        participant: The faulty participant.
        stage: The anchor key of the stage the fault was injected into.

    Returns:
        ``findings`` (anchor → inputs flagged), ``flagged`` (any finding),
        ``flagged_at_stage``, ``first_flagged_anchor``, ``emergence`` (input → first flagged
        anchor), ``emergence_at_stage`` (share of inputs whose emergence is the stage),
        ``top_introduced_stage`` (stage isolation's largest introduced error), ``blamed``
        (the participant is blamed by consensus on some input), and
        ``other_participants_flagged`` (participant → anchors: false positives).
    """
    findings: dict[str, list[str]] = {}
    others: dict[str, list[str]] = {}
    for item in summary.findings:
        if item.participant == participant:
            findings.setdefault(item.anchor, []).append(item.input)
        else:
            anchors_of = others.setdefault(item.participant, [])
            if item.anchor not in anchors_of:
                anchors_of.append(item.anchor)
    # a participant that failed before it was judged has no localization record
    mine = summary.localization.participants.get(participant)
    emergence = dict(mine.emergence) if mine else {}
    ordered = {a: findings[a] for a in summary.anchor_keys if a in findings}
    return {
        "findings": ordered,
        "flagged": bool(ordered),
        "flagged_at_stage": stage in ordered,
        "first_flagged_anchor": next(iter(ordered), None),
        "emergence": emergence,
        "emergence_at_stage": (sum(1 for a in emergence.values() if a == stage) / len(emergence))
        if emergence
        else None,
        "top_introduced_stage": mine.top_stage if mine else None,
        "blamed": bool(summary.localization.blame.counts.get(participant)),
        "other_participants_flagged": others,
    }


def score_injection(
    record: Mapping[str, Any], summary: Summary, exit_code: int | None = None
) -> dict[str, Any]:
    """``ground_truth.json``: the injection's record plus what the analysis detected.

    Args:
        record: What was injected where (:func:`anpred.inject.ground_truth.injection_record`).
        summary: The run's summary.
        exit_code: ``anpred run``'s exit code.
    """
    injected = record["injected"]
    return {
        **record,
        "detected": detection(summary, injected["participant"], injected["stage"]),
        "exit_code": exit_code,
    }


def baseline_detections(
    summary: Summary, clean: Summary, faulty: str, library: str
) -> dict[str, bool]:
    """Per output-level baseline, whether it detects the fault of ``faulty``.

    A baseline detects a fault when it fails the faulty participant on an input where it
    passed the clean participant of the same library (the failure is the fault's).
    """
    return {
        name: bool(summary.failed_inputs(name, faulty) - clean.failed_inputs(name, library))
        for name in summary.baselines
    }


def fault_row(
    summary: Summary,
    clean: Summary,
    model: str,
    library: str,
    faulty: str,
    spec: FaultSpec,
) -> dict[str, Any]:
    """One row of the evaluation's fault table: how every method did on one injected fault.

    Args:
        summary: The fault run's summary.
        clean: The clean run's summary (the baselines' failures there are not the fault's).
        model: The model's name.
        library: The faulty participant's library (its clean participant's name).
        faulty: The faulty participant's name.
        spec: The injected fault.
    """
    anchors = summary.anchor_keys
    det = detection(summary, faulty, spec.stage)
    mine = summary.localization.participants.get(faulty)
    ranking = mine.stage_ranking if mine else []
    blame = summary.localization.blame
    vs_fp64 = summary.deviation.vs_fp64.get(faulty, {})
    row = {
        "model": model,
        "library": library,
        "participant": faulty,
        "stage": spec.stage,
        "stage_index": anchors.index(spec.stage),
        "kind": spec.kind,
        "op": spec.op,
        "severity": spec.severity,
        "node": spec.node or "",
        "partial": spec.partial or "",
        "anpred_detected": det["flagged"],
        "anpred_flagged_at_stage": det["flagged_at_stage"],
        "emergence_at_stage": det["emergence_at_stage"] or 0.0,
        "isolation_top1": bool(ranking) and ranking[0] == spec.stage,
        "isolation_top3": spec.stage in ranking[:3],
        "library_blamed": blame.sole_counts.get(faulty, 0) / max(1, blame.n_inputs) >= 0.5,
        "other_flagged": sorted(det["other_participants_flagged"]),
        "output_rel_l2_vs_fp64": vs_fp64.get(anchors[-1]),
        "stage_rel_l2_vs_fp64": vs_fp64.get(spec.stage),
    }
    for name, detected in baseline_detections(summary, clean, faulty, library).items():
        row[f"baseline:{name}"] = detected
    return row


def fault_outcome(row: dict[str, Any]) -> str:
    """What a fault run's row says, in a few words: whether anpred detected the fault, at
    its stage, with the library blamed, and how many output-level baselines flag it.
    """
    if not row.get("anpred_detected"):
        verdict = "missed by anpred"
    else:
        checks = (
            ("flagged at its stage", row.get("anpred_flagged_at_stage")),
            ("isolation top-1", row.get("isolation_top1")),
            ("library blamed", row.get("library_blamed")),
        )
        verdict = "detected (" + ", ".join(f"{n} {'yes' if ok else 'no'}" for n, ok in checks) + ")"
    baselines = [v for k, v in row.items() if k.startswith("baseline:")]
    return f"{verdict}; {sum(bool(v) for v in baselines)}/{len(baselines)} baselines flag it"


def fault_label(row: dict[str, Any]) -> str:
    """The fault kind of a row with its scope: ``mantissa``, ``mantissa (1 node)``,
    ``mantissa (channels:0.1)`` (the tables group rows by it; rows written before nodes
    and partial faults existed read as the stage-wide kind).
    """
    label = str(row["kind"])
    if row.get("node"):
        label += " (1 node)"
    if row.get("partial"):
        label += f" ({row['partial']})"
    return label
