"""What a run's analysis found, as typed records with one versioned JSON codec.

:class:`Summary` is the content of ``summary.json`` (``docs/run-directory.md``): the analysis
builds it, evaluation, ground-truth scoring, the report and the Python API read it.
:meth:`Summary.to_dict` writes ``"schema_version": SCHEMA_VERSION``; :meth:`Summary.from_dict`
reads the current version and migrates older ones, and refuses a newer or unknown version,
or a summary that lacks a key a reader depends on, with a one-line :class:`UsageError`
(a renamed key must fail loudly, never let a fault silently count as undetected).

Records readers depend on are typed (participants, anchors, findings, per-participant
localization, library blame, propagation, baseline verdicts, deviation tables); deeply nested
statistics (a finding's metrics, concentration, profiles, masking, baseline statistics,
alignment steps) stay plain JSON data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from anpred.errors import UsageError
from anpred.store.summary_drill import DrillDown
from anpred.store.summary_fields import Fields, Json, entries, items, table
from anpred.store.summary_records import (
    Anchor,
    BaselineVerdict,
    Blame,
    Characterization,
    Deviation,
    Finding,
    InputRecord,
    Localization,
    ModelInfo,
    NoiseFloor,
    OracleSettings,
    ParticipantLocalization,
    ParticipantRecord,
    Propagation,
)

#: Version of ``summary.json`` this code writes. 1: written before the key existed (same
#: keys as 2); 2: the typed summary (``schema_version`` added).
SCHEMA_VERSION = 2


@dataclass(frozen=True)
class Summary:
    """Everything a run's analysis found (``summary.json``); see ``docs/run-directory.md``."""

    model: ModelInfo
    options: Json
    inputs: tuple[InputRecord, ...]
    reference: dict[str, str]
    participants: tuple[ParticipantRecord, ...]
    anchors: tuple[Anchor, ...]
    pairwise: bool
    oracle: OracleSettings
    noise_floor: dict[str, NoiseFloor]
    deviation: Deviation
    findings: tuple[Finding, ...]
    localization: Localization
    characterization: Characterization
    baselines: dict[str, dict[str, BaselineVerdict]]
    baseline_details: dict[str, Json]
    alignment: dict[str, dict[str, list[str]]]
    unaligned: list[Json]
    wall_seconds: float | None = None
    #: The machine the workers ran on (:func:`anpred.machine.describe_machine`); ``None``
    #: for runs recorded before it was stored.
    machine: Json | None = None
    #: The drill-down from flagged stages to operators (:mod:`anpred.pipeline.drill`);
    #: ``None`` when it did not run (no findings, ``--no-drill``, older runs).
    drill: DrillDown | None = None
    #: Precision classes (:mod:`anpred.library.precision`): ``{"participants": {name:
    #: {format, scope, class}}, "classes": {class: {members, reference, factor, floor}}}``;
    #: ``None`` for runs analysed before classes existed (every participant fp32).
    precision: Json | None = None

    def precision_class(self, participant: str) -> str:
        """The precision class ``participant`` was judged in (``fp32`` when unrecorded)."""
        record = (self.precision or {}).get("participants", {}).get(participant)
        return str(record["class"]) if record else "fp32"

    @property
    def anchor_keys(self) -> list[str]:
        """Anchor keys in topological order, final output last."""
        return [a.key for a in self.anchors]

    @property
    def input_ids(self) -> list[str]:
        """Input ids in run order."""
        return [i.id for i in self.inputs]

    def participant(self, name: str) -> ParticipantRecord | None:
        """The record of participant ``name`` (``None``: not in this run)."""
        return next((p for p in self.participants if p.participant == name), None)

    def findings_of(self, participant: str) -> list[Finding]:
        """The findings of one participant."""
        return [f for f in self.findings if f.participant == participant]

    def failed_inputs(self, baseline: str, participant: str) -> set[str]:
        """Inputs on which an output-level baseline failed ``participant`` (none if unjudged)."""
        verdict = self.baselines.get(baseline, {}).get(participant)
        return set(verdict.failed_inputs) if verdict else set()

    def to_dict(self) -> Json:
        """The JSON form written to ``summary.json`` (``schema_version`` first)."""
        data: Json = {
            "schema_version": SCHEMA_VERSION,
            "model": self.model.to_dict(),
            "options": self.options,
            "inputs": [{"id": i.id, "source": i.source} for i in self.inputs],
            "reference": self.reference,
            "participants": [p.to_dict() for p in self.participants],
            "anchors": [a.to_dict() for a in self.anchors],
            "pairwise": self.pairwise,
            "oracle": self.oracle.to_dict(),
            "noise_floor": {a: vars(n).copy() for a, n in self.noise_floor.items()},
            "deviation": vars(self.deviation).copy(),
            "findings": [f.to_dict() for f in self.findings],
            "localization": self.localization.to_dict(),
            "characterization": self.characterization.to_dict(),
            "baselines": {
                b: {
                    p: {"passed": v.passed, "failed_inputs": list(v.failed_inputs)}
                    for p, v in per.items()
                }
                for b, per in self.baselines.items()
            },
            "baseline_details": self.baseline_details,
            "alignment": self.alignment,
            "unaligned": self.unaligned,
        }
        if self.wall_seconds is not None:
            data["wall_seconds"] = self.wall_seconds
        if self.machine is not None:
            data["machine"] = self.machine
        if self.drill is not None:
            data["drill"] = self.drill.to_dict()
        if self.precision is not None:
            data["precision"] = self.precision
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Summary:
        """Read ``summary.json`` content of any supported schema version.

        Raises:
            UsageError: A newer or unknown schema version, or a key missing or ill-typed.
        """
        f = Fields(data, "")
        version = f.get("schema_version", 1)
        if version not in (1, SCHEMA_VERSION):
            raise UsageError(
                f"summary.json has schema version {version!r}; this anpred reads versions "
                f"1..{SCHEMA_VERSION} (written by a newer anpred? upgrade anpred)"
            )
        # version 1 -> 2: same keys, only ``schema_version`` was added
        return _read(f)


def _read(f: Fields) -> Summary:
    loc, char, dev = f.fields("localization"), f.fields("characterization"), f.fields("deviation")
    oracle = f.fields("oracle")
    return Summary(
        model=ModelInfo.from_dict(f.fields("model")),
        options=f.need("options", dict),
        inputs=tuple(
            InputRecord(r.need("id", str), r.get("source", "", str) or "")
            for r in items(f, "inputs")
        ),
        reference=f.need("reference", dict),
        participants=tuple(ParticipantRecord.from_dict(r) for r in items(f, "participants")),
        anchors=tuple(
            Anchor(
                r.need("key", str),
                r.need("anchor", str),
                r.get("module", None, str),
                r.get("group", None, str),
                None if r.get("shape", None) is None else tuple(r.need("shape", list)),
            )
            for r in items(f, "anchors")
        ),
        pairwise=f.need("pairwise", bool),
        oracle=OracleSettings(
            oracle.need("primary_metric", str),
            oracle.need("outlier_k", (int, float)),
            oracle.need("noise_factor", (int, float)),
            oracle.need("mad_floor_rel", (int, float)),
            oracle.get("threshold_rule", None, str),
            oracle.get("calibration", None, dict),
        ),
        noise_floor={
            a: NoiseFloor(n.need("median", (int, float)), n.need("per_input", dict))
            for a, n in entries(f, "noise_floor")
        },
        deviation=Deviation(
            table(dev.need("vs_consensus", dict), "deviation.vs_consensus"),
            table(dev.need("vs_fp64", dict), "deviation.vs_fp64"),
        ),
        findings=tuple(Finding.from_dict(r) for r in items(f, "findings")),
        localization=Localization(
            Blame.from_dict(loc.fields("blame")),
            {p: ParticipantLocalization.from_dict(r) for p, r in entries(loc, "participants")},
        ),
        characterization=Characterization(
            {
                p: Propagation(
                    r.need("profiles", dict),
                    r.need("direction_changes", (int, float)),
                    r.need("worst_anchor", str),
                    r.need("dimension_at_worst", dict),
                )
                for p, r in entries(char, "propagation")
            },
            char.need("masking", dict),
            char.need("masking_cases", list),
        ),
        baselines={
            b: {
                p: BaselineVerdict(v.need("passed", bool), tuple(v.need("failed_inputs", list)))
                for p, v in entries(per)
            }
            for b, per in entries(f, "baselines")
        },
        baseline_details=f.need("baseline_details", dict),
        alignment=f.need("alignment", dict),
        unaligned=f.need("unaligned", list),
        wall_seconds=f.get("wall_seconds", None, (int, float)),
        machine=f.get("machine", None, dict),
        drill=DrillDown.from_dict(f.fields("drill")) if "drill" in f.data else None,
        precision=f.get("precision", None, dict),
    )
