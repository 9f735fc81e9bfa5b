"""``ground_truth.json``: what was injected where (the truth of an ``anpred inject`` run).

Written by ``anpred inject`` into the run directory, next to ``summary.json``. The
``injected`` part is the truth (fault, participant, stage, nodes, and the record the
faulty worker wrote into its ``status.json``, which proves the fault was applied). The
``detected`` part -- what the oracle and localization reported for the faulty participant,
so that evaluation harnesses can score detection, stage and library localization, and
false positives, from one file -- is scoring, added by :mod:`anpred.evaluation.scoring`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from anpred.inject.plan import PlannedFault
from anpred.inject.transforms import recorded_fault
from anpred.store import RunStore
from anpred.store.summary import Summary

#: Bump when the file's layout changes.
GROUND_TRUTH_VERSION = 1


def _recorded(run_dir: Path, participant: str) -> tuple[str | None, dict[str, Any] | None]:
    folder = RunStore(run_dir).participant(participant)
    if not folder.has_status():
        return None, None
    data = folder.read_status()
    return data.get("state"), recorded_fault(data)


def injection_record(
    run_dir: Path,
    participant: str,
    replaces: str,
    library: str,
    planned: PlannedFault,
    summary: Summary,
) -> dict[str, Any]:
    """What was injected where, and whether the worker applied it (``ground_truth.json``
    without the scoring, which :func:`anpred.evaluation.scoring.score_injection` adds).

    Args:
        run_dir: The run directory.
        participant: Name of the faulty participant.
        replaces: Name of the clean participant it stands for.
        library: Its library.
        planned: The fault and the nodes it targets (resolved in the parent process).
        summary: The run's summary.
    """
    anchors = summary.anchor_keys
    state, recorded = _recorded(run_dir, participant)
    spec = planned.spec
    return {
        "version": GROUND_TRUTH_VERSION,
        "model": summary.model.to_dict(),
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
            p.participant for p in summary.participants if p.participant != participant
        ],
    }
