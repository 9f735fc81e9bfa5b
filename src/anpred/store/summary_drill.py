"""The drill-down's typed record: the ``drill`` entry of ``summary.json`` (optional).

Written only when a run's drill-down ran (runs with findings, without ``--no-drill``);
summaries without it read as ``drill=None``, so the schema version is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from anpred.store.summary_fields import Fields, Json, items


@dataclass(frozen=True)
class DrillOp:
    """One operator of a drilled stage, for one participant (medians over inputs).

    Attributes:
        key: Operator anchor key (``op0007``).
        node: ONNX node name.
        op_type: ONNX op type.
        module: Torch module path, when known.
        introduced: The error the operator introduces by itself (relative L2 vs fp64,
            the operator run on the fp64 reference's values of its inputs).
        threshold: The value ``introduced`` had to exceed to stand out (population
            outlier and above the noise factor times the fp32 reference's).
        stands_out: Whether it stood out on at least half of the inputs.
        chain: Error at the operator's output, the stage run from the fp64 stage input.
        finding: Whether the oracle flagged the chain value on at least half the inputs.
    """

    key: str
    node: str
    op_type: str
    module: str | None
    introduced: float | None
    threshold: float | None
    stands_out: bool
    chain: float | None
    finding: bool

    def to_dict(self) -> Json:
        """JSON form."""
        return dict(vars(self))

    @classmethod
    def from_dict(cls, data: Any) -> DrillOp:
        """Read from JSON."""
        f = Fields.of(data)
        number = (int, float)
        return cls(
            f.need("key", str),
            f.need("node", str),
            f.need("op_type", str),
            f.get("module", None, str),
            f.get("introduced", None, number),
            f.get("threshold", None, number),
            f.need("stands_out", bool),
            f.get("chain", None, number),
            f.need("finding", bool),
        )


@dataclass(frozen=True)
class DrillTarget:
    """The drill-down of one flagged (participant, stage).

    Attributes:
        participant: The flagged participant.
        stage: The flagged stage (anchor key).
        ops: The stage's operator chain, graph order.
        named: Key of the first operator that introduces the error, or ``None``.
        basis: Why it is named: ``introduced`` (its own introduced error stands out) or
            ``finding`` (the first flagged operator output of the chain); ``None``.
        reason: Why no operator is named (empty when one is).
    """

    participant: str
    stage: str
    ops: tuple[DrillOp, ...]
    named: str | None
    basis: str | None
    reason: str = ""

    @property
    def named_op(self) -> DrillOp | None:
        """The named operator's record."""
        return next((o for o in self.ops if o.key == self.named), None)

    def to_dict(self) -> Json:
        """JSON form."""
        return {
            "participant": self.participant,
            "stage": self.stage,
            "ops": [o.to_dict() for o in self.ops],
            "named": self.named,
            "basis": self.basis,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: Any) -> DrillTarget:
        """Read from JSON."""
        f = Fields.of(data)
        return cls(
            f.need("participant", str),
            f.need("stage", str),
            tuple(DrillOp.from_dict(r) for r in items(f, "ops")),
            f.get("named", None, str),
            f.get("basis", None, str),
            f.get("reason", "", str) or "",
        )


@dataclass(frozen=True)
class DrillDown:
    """What the drill-down of a run found.

    Attributes:
        targets: One per flagged (participant, stage).
        population: The participants whose drill jobs formed the population.
        failed: Participant → why its drill job gave nothing.
        wall_seconds: Wall time of the drill-down (graph, jobs, analysis).
        reason: Why the drill-down could not run at all (empty when it ran).
    """

    targets: tuple[DrillTarget, ...]
    population: tuple[str, ...] = ()
    failed: dict[str, str] | None = None
    wall_seconds: float | None = None
    reason: str = ""

    def target(self, participant: str, stage: str) -> DrillTarget | None:
        """The drill-down of (participant, stage), if drilled."""
        return next(
            (t for t in self.targets if t.participant == participant and t.stage == stage), None
        )

    def to_dict(self) -> Json:
        """JSON form."""
        return {
            "targets": [t.to_dict() for t in self.targets],
            "population": list(self.population),
            "failed": dict(self.failed or {}),
            "wall_seconds": self.wall_seconds,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: Any) -> DrillDown:
        """Read from JSON (a mapping, or the reader of one)."""
        f = Fields.of(data, "drill")
        return cls(
            tuple(DrillTarget.from_dict(r) for r in items(f, "targets")),
            tuple(f.get("population", [], list)),
            dict(f.get("failed", {}, dict)),
            f.get("wall_seconds", None, (int, float)),
            f.get("reason", "", str) or "",
        )
