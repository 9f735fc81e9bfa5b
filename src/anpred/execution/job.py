"""A participant's worker job: what the worker process reads from its job file.

:func:`~anpred.execution.pool.run_workers` writes one per participant
(:meth:`WorkerJob.to_dict`, the job file in its folder of the run store); the worker reads
it back (:meth:`WorkerJob.from_dict`) and reads its fields by attribute. The fields every
worker of a run shares (the model, the inputs, the planned transforms) come from the run as
a mapping (:func:`anpred.pipeline.execute.model_job`), the others per participant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anpred.interchange.transform import TRANSFORMS_KEY
from anpred.participants import Participant

#: Job key: the inputs that get the observer check (default: the job's first ones); set for
#: the chunks of a run (:mod:`anpred.pipeline.chunks`) and the drill-down (none).
OBSERVER_KEY = "observer_inputs"

#: Job key: the isolation source's worker may still be running; wait for its captures.
REFERENCE_RUNNING = "reference_running"

#: Job key: per participant, what its worker takes from a clean participant's captures
#: instead of computing it (a fault run, :mod:`anpred.evaluation.fault_runs`):
#: ``{"source": folder, "changed": [anchor keys], "isolated": [anchor keys]}``, the anchors
#: it recomputes (the others are the source's), anchored and stage-isolated.
RESUME_KEY = "resume"


@dataclass(frozen=True)
class WorkerJob:
    """One participant's worker job.

    Attributes:
        participant: The participant's record (``Participant.to_dict()``: name, library,
            configuration, settings).
        out: Its folder of the run store.
        model: What it runs (``ModelJob.to_dict()``).
        inputs: The run's ``inputs.npz``.
        input_ids: The inputs it runs, in order.
        isolation_source: The fp64 reference's capture folder (stage isolation), or ``None``.
        transforms: The transform records planned per participant (its own are applied).
        observer_inputs: The inputs whose plain output it also computes (``None``: its
            first few, :data:`~anpred.execution.worker.OBSERVER_INPUTS`).
        reference_running: The isolation source's worker may still be running.
        resume: What it takes from a clean participant's captures (:data:`RESUME_KEY`), or
            ``None``: it computes everything.
    """

    participant: Mapping[str, Any]
    out: Path
    model: Mapping[str, Any]
    inputs: Path
    input_ids: tuple[str, ...]
    isolation_source: Path | None = None
    transforms: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    observer_inputs: tuple[str, ...] | None = None
    reference_running: bool = False
    resume: Mapping[str, Any] | None = None

    @classmethod
    def of(
        cls,
        shared: Mapping[str, Any],
        participant: Participant,
        out: Path,
        input_ids: Sequence[str],
        isolation_source: Path | None,
        reference_running: bool = False,
    ) -> WorkerJob:
        """The job of ``participant`` from the fields every worker of the run shares."""
        observed = shared.get(OBSERVER_KEY)
        return cls(
            participant=participant.to_dict(),
            out=out,
            model=shared["model"],
            inputs=Path(shared["inputs"]),
            input_ids=tuple(input_ids),
            isolation_source=isolation_source,
            transforms=shared.get(TRANSFORMS_KEY) or {},
            observer_inputs=None if observed is None else tuple(observed),
            reference_running=reference_running or bool(shared.get(REFERENCE_RUNNING)),
            resume=(shared.get(RESUME_KEY) or {}).get(participant.name),
        )

    @property
    def name(self) -> str:
        """The participant's name."""
        return str(self.participant["name"])

    @property
    def library(self) -> str:
        """The participant's library."""
        return str(self.participant["library"])

    @property
    def settings(self) -> Mapping[str, Any]:
        """The participant's settings (its configuration's)."""
        return self.participant.get("settings") or {}

    def to_dict(self) -> dict[str, Any]:
        """The job file's content (JSON-ready; the keys of the job files before the type)."""
        data: dict[str, Any] = {
            "model": dict(self.model),
            "inputs": str(self.inputs),
            **({TRANSFORMS_KEY: dict(self.transforms)} if self.transforms else {}),
            **(
                {OBSERVER_KEY: list(self.observer_inputs)}
                if self.observer_inputs is not None
                else {}
            ),
            **({REFERENCE_RUNNING: True} if self.reference_running else {}),
            **({RESUME_KEY: dict(self.resume)} if self.resume else {}),
            "participant": dict(self.participant),
            "out": str(self.out),
            "input_ids": list(self.input_ids),
            "isolation_source": str(self.isolation_source) if self.isolation_source else None,
        }
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkerJob:
        """Inverse of :meth:`to_dict`."""
        observed = data.get(OBSERVER_KEY)
        source = data.get("isolation_source")
        return cls(
            participant=data["participant"],
            out=Path(data["out"]),
            model=data["model"],
            inputs=Path(data["inputs"]),
            input_ids=tuple(data["input_ids"]),
            isolation_source=Path(source) if source else None,
            transforms=data.get(TRANSFORMS_KEY) or {},
            observer_inputs=None if observed is None else tuple(observed),
            reference_running=bool(data.get(REFERENCE_RUNNING)),
            resume=data.get(RESUME_KEY),
        )
