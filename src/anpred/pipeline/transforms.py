"""A run's transforms, planned once its export exists and before any worker starts.

Three sources, all in ``RunOptions.extra`` (so in the run's settings, which a resumed run
must match): ``extra["faults"]`` (``anpred inject``, the evaluation), planned
into fault transforms by :func:`anpred.inject.transforms.fault_transforms`;
``extra["transforms"]``: ``{participant name: [transform record, ...]}`` handed over as
they are (any registered kind, see :mod:`anpred.interchange.transform`); and
``extra["ports"]``: users' ports (:mod:`anpred.ports`), each handed to its participant.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from anpred.interchange.export import AnchoredExport
from anpred.interchange.transform import TRANSFORMS_KEY, check_records
from anpred.ports.spec import port_specs, port_transforms
from anpred.store import RunStore

#: Folder, inside a participant's folder, of the graphs a transform rewrote.
MODEL_FOLDER = "model"


def plan_transforms(
    extra: Mapping[str, Any],
    export: AnchoredExport,
    run_dir: Path,
    deferred: Collection[str] = (),
) -> dict[str, list[dict[str, Any]]]:
    """Every participant's transform records for a run (``job["transforms"]``).

    Args:
        extra: ``RunOptions.extra`` (``faults`` and ``transforms``).
        export: The run's anchored export.
        run_dir: The run directory (rewritten graphs go to the participant's folder).
        deferred: Faulty participants whose resumed worker rewrites their graphs
            (:func:`anpred.inject.transforms.deferred_graphs`).

    Raises:
        UsageError: An invalid fault or transform record.
    """
    from anpred.inject.participants import EXTRA_KEY

    given = extra.get(TRANSFORMS_KEY) or {}
    check_records(given)
    planned: dict[str, list[dict[str, Any]]] = {k: list(v) for k, v in given.items()}
    if extra.get(EXTRA_KEY):
        from anpred.inject.transforms import fault_transforms

        faults = fault_transforms(
            extra[EXTRA_KEY],
            export,
            lambda name: RunStore(run_dir).participant(name).folder / MODEL_FOLDER,
            deferred,
        )
        for name, records in faults.items():
            planned.setdefault(name, []).extend(records)
    for name, records in port_transforms(port_specs(extra)).items():  # users' ports
        planned.setdefault(name, []).extend(records)
    return planned
