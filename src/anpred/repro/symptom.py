"""The predicate of a reduction: whether a reduced case shows the **same** symptom.

A finding's symptom, as the drill-down recorded it (:class:`Symptom`): this participant's
error stands out at this operator, by this basis (its introduced error, or its output
flagged), this large. A case shows the same symptom when the oracle, judging the case's
target operator against the same population on the same inputs, says (:func:`check`):

1. the participant is flagged there, by the same basis, on at least half the inputs;
2. nobody else is flagged there whom the drill-down did not also flag at that operator
   (a case that makes a clean participant deviate shows another error);
3. the participant's error there is within :data:`SYMPTOM_FACTOR` of the drill-down's.

"Any failure" is not enough: a case that lost the mechanism (a fusion cut apart) may still
deviate a little, or a case may make another participant deviate instead; both are
rejected with the reason.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from anpred.analysis.oracle import NOISE_FACTOR
from anpred.analysis.verdict import Criterion, Verdict
from anpred.store.summary_drill import DrillDown, DrillTarget

#: How far (as a ratio, either way) a reduced case's error at the target operator may lie
#: from the drill-down's for the same symptom: the geometric midpoint of 1 (the same
#: error: a case fed the fp64 values of the operator's inputs computes what stage
#: isolation computed, so a faithful case repeats the drill-down's value; measured ratios
#: 0.98-1.02, docs/reproducers.md) and the oracle's noise factor (10: the distance that
#: separates an error from the fp32 floor). A case whose error moved further than
#: sqrt(10) = 3.16x has moved closer to another error than to this one.
SYMPTOM_FACTOR = math.sqrt(NOISE_FACTOR)

_BASES = ("introduced", "finding")


@dataclass(frozen=True)
class Symptom:
    """A drilled finding's symptom.

    Attributes:
        participant: The flagged participant.
        stage: The drilled stage.
        op: The named operator (drill-graph key).
        node: Its node name.
        op_type: Its ONNX op type.
        basis: ``introduced`` or ``finding`` (as the drill-down named it).
        error: The drill-down's value (introduced error, or error at its output; rel. L2).
        allowed: Other participants the drill-down flagged at that operator too.
    """

    participant: str
    stage: str
    op: str
    node: str
    op_type: str
    basis: str
    error: float
    allowed: frozenset[str] = frozenset()

    @property
    def label(self) -> str:
        """``participant@stage``, how ``--finding`` names it."""
        return f"{self.participant}@{self.stage}"


def _flags(op: object, basis: str) -> bool:
    return bool(op.stands_out if basis == "introduced" else op.finding)  # type: ignore[attr-defined]


def symptom_of(drill: DrillDown, target: DrillTarget) -> Symptom | None:
    """The symptom of a drilled (participant, stage), or ``None`` when no operator is named."""
    named = target.named_op
    if named is None or target.basis not in _BASES:
        return None
    error = named.introduced if target.basis == "introduced" else named.chain
    if error is None:
        return None
    allowed = set()
    for other in drill.targets:
        if other.participant == target.participant or other.stage != target.stage:
            continue
        op = next((o for o in other.ops if o.key == named.key), None)
        if op is not None and (op.stands_out or op.finding):
            allowed.add(other.participant)
    return Symptom(
        target.participant, target.stage, named.key, named.node, named.op_type,
        str(target.basis), float(error), frozenset(allowed),
    )  # fmt: skip


@dataclass(frozen=True)
class SymptomCheck:
    """The oracle's word on one case.

    Attributes:
        reproduces: Whether the case shows the same symptom.
        reason: Why not (empty when it does).
        error: The participant's error at the target (median over inputs; ``None``: none).
        ratio: ``error`` / the drill-down's error.
        flagged: Everyone flagged at the target, by the symptom's basis.
    """

    reproduces: bool
    reason: str
    error: float | None
    ratio: float | None
    flagged: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        return dict(vars(self), flagged=list(self.flagged))


def _median(values: Iterable[float | None]) -> float | None:
    found = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(found) if found else None


def _value(v: Verdict, basis: str) -> float | None:
    if basis == "introduced":
        return v.introduced.value if v.introduced is not None else None
    return v.vs_fp64.get(v.primary.metric)


def _flagged(v: Verdict, basis: str) -> bool:
    return Criterion.INTRODUCED in v.exceeded if basis == "introduced" else v.finding


def check(
    symptom: Symptom,
    key: str,
    verdicts: Mapping[tuple[str, str, str], Verdict],
    input_ids: Sequence[str],
    factor: float = SYMPTOM_FACTOR,
) -> SymptomCheck:
    """Whether the case whose target anchor is ``key`` shows ``symptom`` (module doc).

    Args:
        symptom: The finding's symptom.
        key: The case's target anchor in the trial (``c0/op0007``).
        verdicts: The trial's verdicts.
        input_ids: The trial's inputs.
        factor: :data:`SYMPTOM_FACTOR`.
    """
    needed = max(1, math.ceil(len(input_ids) / 2))
    by_participant: dict[str, list[Verdict]] = {}
    for (p, k, i), v in verdicts.items():
        if k == key and i in input_ids:
            by_participant.setdefault(p, []).append(v)
    mine = by_participant.get(symptom.participant, [])
    flagged = tuple(
        sorted(
            p
            for p, vs in by_participant.items()
            if sum(_flagged(v, symptom.basis) for v in vs) >= needed
        )
    )
    error = _median(_value(v, symptom.basis) for v in mine)
    ratio = None if error is None or symptom.error <= 0 else error / symptom.error
    if not mine:
        return SymptomCheck(False, "the participant gave no judged capture", None, None, flagged)
    if symptom.participant not in flagged:
        reason = f"{symptom.participant} is not flagged at the operator ({symptom.basis})"
        return SymptomCheck(False, reason, error, ratio, flagged)
    others = [p for p in flagged if p != symptom.participant and p not in symptom.allowed]
    if others:
        reason = f"another participant is flagged there too: {', '.join(others)}"
        return SymptomCheck(False, reason, error, ratio, flagged)
    if ratio is None or not (1 / factor <= ratio <= factor):
        shown = "?" if ratio is None else f"{ratio:.3g}"
        reason = f"its error is {shown}x the drill-down's (allowed: 1/{factor:.3g}..{factor:.3g}x)"
        return SymptomCheck(False, reason, error, ratio, flagged)
    return SymptomCheck(True, "", error, ratio, flagged)
