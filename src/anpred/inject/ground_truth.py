"""``ground_truth.json``: what was injected where, and what the run's analysis made of it.

Written by ``anpred inject`` into the run directory, next to ``summary.json``. The
``injected`` part is the truth (fault, participant, stage, nodes, and the record the
faulty worker wrote into its ``status.json``, which proves the fault was applied); the
``detected`` part is what the oracle and localization reported for the faulty
participant, so that evaluation harnesses can score detection, stage and library
localization, and false positives, from one file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from anpred.execution.layout import participant_dir, read_json
from anpred.inject.plan import PlannedFault

#: Bump when the file's layout changes.
GROUND_TRUTH_VERSION = 1


def _recorded(run_dir: Path, participant: str) -> tuple[str | None, dict[str, Any] | None]:
    status = participant_dir(run_dir, participant) / "status.json"
    if not status.exists():
        return None, None
    data = read_json(status)
    return data.get("state"), (data.get("settings") or {}).get("fault")


def detection(
    summary: Mapping[str, Any], participant: str, stage: str, anchors: Sequence[str]
) -> dict[str, Any]:
    """What the analysis reported about ``participant``, scored against ``stage``.

    Returns:
        ``findings`` (anchor → inputs flagged), ``flagged`` (any finding),
        ``flagged_at_stage``, ``emergence`` (input → first flagged anchor),
        ``emergence_at_stage`` (share of inputs whose emergence is the stage),
        ``top_introduced_stage`` (stage isolation's largest introduced error),
        ``blamed`` (the participant is blamed by consensus on some input), and
        ``other_participants_flagged`` (participant → anchors: false positives).
    """
    findings: dict[str, list[str]] = {}
    others: dict[str, list[str]] = {}
    for item in summary.get("findings", []):
        if item["participant"] == participant:
            findings.setdefault(item["anchor"], []).append(item["input"])
        else:
            anchors_of = others.setdefault(item["participant"], [])
            if item["anchor"] not in anchors_of:
                anchors_of.append(item["anchor"])
    local = summary.get("localization", {})
    mine = local.get("participants", {}).get(participant, {})
    emergence = mine.get("emergence", {})
    counts = local.get("blame", {}).get("counts", {})
    ordered = {a: findings[a] for a in anchors if a in findings}
    return {
        "findings": ordered,
        "flagged": bool(ordered),
        "flagged_at_stage": stage in ordered,
        "first_flagged_anchor": next(iter(ordered), None),
        "emergence": emergence,
        "emergence_at_stage": (sum(1 for a in emergence.values() if a == stage) / len(emergence))
        if emergence
        else None,
        "top_introduced_stage": mine.get("top_stage"),
        "blamed": bool(counts.get(participant)),
        "other_participants_flagged": others,
    }


def ground_truth(
    run_dir: Path,
    participant: str,
    replaces: str,
    library: str,
    planned: PlannedFault,
    summary: Mapping[str, Any],
    exit_code: int | None = None,
) -> dict[str, Any]:
    """Assemble ``ground_truth.json`` for a finished inject run.

    Args:
        run_dir: The run directory.
        participant: Name of the faulty participant.
        replaces: Name of the clean participant it stands for.
        library: Its library.
        planned: The fault and the nodes it targets (resolved in the parent process).
        summary: The run's ``summary.json`` content.
        exit_code: ``anpred run``'s exit code.
    """
    anchors = [a["key"] for a in summary.get("anchors", [])]
    state, recorded = _recorded(run_dir, participant)
    spec = planned.spec
    return {
        "version": GROUND_TRUTH_VERSION,
        "model": summary.get("model"),
        "injected": {
            "participant": participant,
            "replaces": replaces,
            "library": library,
            **planned.record(),
            "stage_index": anchors.index(spec.stage) if spec.stage in anchors else None,
            "anchors": anchors,
        },
        "worker": {
            "state": state,
            "recorded_fault": recorded,
            "applied_as_planned": recorded is not None
            and recorded.get("nodes") == list(planned.nodes),
        },
        "clean_participants": [
            p["participant"]
            for p in summary.get("participants", [])
            if p.get("participant") != participant
        ],
        "detected": detection(summary, participant, spec.stage, anchors),
        "exit_code": exit_code,
    }
