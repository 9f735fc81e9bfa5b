"""``repro.json``: what a reproducer folder holds, whether it reproduces, and its numbers.

One :class:`ReproRecord` per folder; the run's ``repro/index.json`` lists them all
(:func:`write_index`, :func:`load_reproducers`), which is what the report and
``anpred.load(...).reproducers`` read.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from anpred.store.files import read_json, write_json

#: File name of a reproducer's record, and of the run's index of them.
RECORD_FILE = "repro.json"
INDEX_FILE = "index.json"
#: The folder of a run directory that holds its reproducers (default ``--out``).
REPRO_FOLDER = "repro"


class Status:
    """How a reproducer ended (one word each)."""

    #: Its script ran in the library's own environment and showed the error.
    VERIFIED = "verified"
    #: The reduced case shows the symptom under the oracle, but the script did not.
    NOT_REPRODUCED = "not-reproduced"
    #: The reduced case shows the symptom; no script could be written or run.
    NO_SCRIPT = "no-script"
    #: No case, not even the stage alone, showed the same symptom.
    NO_CASE = "no-case"


@dataclass(frozen=True)
class ReproRecord:
    """One finding's reproducer (``repro.json``); see docs/reproducers.md.

    Attributes:
        finding: ``participant@stage``.
        participant: The flagged participant.
        library: Its library.
        settings: Its configuration settings, as its job ran them.
        stage: The drilled stage.
        op: The drill-down's named operator key; ``node``, ``op_type``: what it is.
        basis: Why the drill-down named it (``introduced`` / ``finding``).
        original_error: The drill-down's error at the operator (rel. L2 vs fp64).
        status: :class:`Status` word.
        reason: Why it is not verified (empty when it is).
        folder: The reproducer's folder (relative to the index's folder).
        ops_in_case: Operators in ``model.onnx``; ``case_nodes``: their node names.
        ops_in_stage: Operators of the drilled stage.
        ops_in_model: Operators of the run's model.
        minimal: Whether no operator of the case can be removed.
        rounds: Trials the reduction ran; ``cases_tried``: cases it judged.
        case_error: The oracle's median error of the case at the operator, and
            ``case_ratio``, that over ``original_error``.
        stage_baseline: The stage cut alone: ``{"ops", "reproduces", "reason"}``.
        floor: ``{"reference", "floor", "factor", "threshold"}``.
        script: ``{"name", "command", "returncode", "error", "errors", "seconds",
            "output"}`` of the verification run, or empty.
        bisect: The settings bisection (:mod:`anpred.repro.bisect`), or empty.
        versions: Library and converter versions.
        machine: CPU and its numeric features (:func:`anpred.machine.describe_machine`).
        folder_bytes: Size of the folder.
    """

    finding: str
    participant: str
    library: str
    settings: dict[str, Any]
    stage: str
    op: str
    node: str
    op_type: str
    basis: str
    original_error: float
    status: str
    reason: str = ""
    folder: str = ""
    ops_in_case: int = 0
    case_nodes: list[str] = field(default_factory=list)
    ops_in_stage: int = 0
    ops_in_model: int = 0
    minimal: bool = False
    rounds: int = 0
    cases_tried: int = 0
    case_error: float | None = None
    case_ratio: float | None = None
    stage_baseline: dict[str, Any] = field(default_factory=dict)
    floor: dict[str, Any] = field(default_factory=dict)
    script: dict[str, Any] = field(default_factory=dict)
    bisect: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=dict)
    folder_bytes: int = 0

    @property
    def verified(self) -> bool:
        """Whether its script ran and showed the error."""
        return self.status == Status.VERIFIED

    @property
    def reduction_ratio(self) -> float | None:
        """Operators in the reproducer / operators in the model."""
        return self.ops_in_case / self.ops_in_model if self.ops_in_model else None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {**asdict(self), "reduction_ratio": self.reduction_ratio}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReproRecord:
        """Read from JSON (unknown keys ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def write_record(folder: Path, record: ReproRecord) -> None:
    """Write ``folder/repro.json``."""
    write_json(folder / RECORD_FILE, record.to_dict())


def write_index(out: Path, records: list[ReproRecord]) -> None:
    """Write ``out/index.json``: every reproducer's record (folders relative to ``out``)."""
    write_json(out / INDEX_FILE, {"reproducers": [r.to_dict() for r in records]})


def load_reproducers(out: Path) -> list[ReproRecord]:
    """The reproducers indexed in ``out`` (a run's ``repro/``); empty when there are none."""
    path = Path(out) / INDEX_FILE
    if not path.exists():
        return []
    data = read_json(path, dict)
    return [ReproRecord.from_dict(r) for r in data.get("reproducers", [])]
