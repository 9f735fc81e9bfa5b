"""Emergence anchors and library blame by consensus.

Inputs are plain data produced by the oracle: the anchors in topological order and, for
every (participant, input_id) pair, the anchors where that participant has a finding.
A pair with no finding must still be present (with an empty collection) so that it is
counted as clean; :func:`collect_findings` builds the mapping from per-anchor verdicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anpred.errors import UsageError

FindingKey = tuple[str, str]
"""``(participant, input_id)``."""


def collect_findings(
    records: Iterable[tuple[str, str, str, bool]],
) -> dict[FindingKey, tuple[str, ...]]:
    """Group per-anchor oracle verdicts into the anchors with a finding per (participant, input).

    Args:
        records: ``(participant, anchor, input_id, is_finding)`` for every judged triple.

    Returns:
        ``{(participant, input_id): anchors with a finding}``, in record order; pairs whose
        every verdict is clean map to an empty tuple.
    """
    grouped: dict[FindingKey, list[str]] = {}
    for participant, anchor, input_id, is_finding in records:
        anchors = grouped.setdefault((participant, input_id), [])
        if is_finding and anchor not in anchors:
            anchors.append(anchor)
    return {key: tuple(anchors) for key, anchors in grouped.items()}


def _positions(anchors: Sequence[str]) -> dict[str, int]:
    positions = {anchor: i for i, anchor in enumerate(anchors)}
    if len(positions) != len(anchors):
        raise UsageError(f"anchor names must be unique, got {list(anchors)}")
    return positions


def _earliest(positions: Mapping[str, int], finding_anchors: Iterable[str]) -> int | None:
    earliest: int | None = None
    for anchor in finding_anchors:
        if anchor not in positions:
            raise UsageError(f"finding at unknown anchor '{anchor}'")
        position = positions[anchor]
        if earliest is None or position < earliest:
            earliest = position
    return earliest


def emergence_anchor(anchors: Sequence[str], finding_anchors: Iterable[str]) -> str | None:
    """Return the first anchor in topological order that has a finding, or ``None``.

    Args:
        anchors: All anchors in topological order.
        finding_anchors: Anchors where one participant has a finding for one input.

    Raises:
        UsageError: When a finding names an anchor that is not in ``anchors``.
    """
    position = _earliest(_positions(anchors), finding_anchors)
    return None if position is None else anchors[position]


@dataclass(frozen=True)
class Emergence:
    """Where one participant's finding first appears for one input.

    Attributes:
        participant: The participant.
        input_id: The input.
        anchor: The emergence anchor, ``None`` when the participant has no finding.
        position: Index of ``anchor`` in the topological order, ``None`` with it.
    """

    participant: str
    input_id: str
    anchor: str | None
    position: int | None

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready plain data."""
        return {
            "participant": self.participant,
            "input_id": str(self.input_id),
            "anchor": self.anchor,
            "position": self.position,
        }


def emergences(
    anchors: Sequence[str], findings: Mapping[FindingKey, Iterable[str]]
) -> tuple[Emergence, ...]:
    """Compute the emergence anchor of every (participant, input) pair.

    Args:
        anchors: All anchors in topological order.
        findings: ``{(participant, input_id): anchors with a finding}``.

    Returns:
        One :class:`Emergence` per key of ``findings``, in the mapping's order.
    """
    positions = _positions(anchors)
    result = []
    for (participant, input_id), finding_anchors in findings.items():
        position = _earliest(positions, finding_anchors)
        anchor = None if position is None else anchors[position]
        result.append(Emergence(participant, input_id, anchor, position))
    return tuple(result)


@dataclass(frozen=True)
class EmergenceDistribution:
    """How one participant's emergence anchors are distributed across inputs.

    Attributes:
        participant: The participant.
        counts: ``{anchor: number of inputs whose emergence anchor it is}`` for every anchor,
            in topological order (zeros included).
        n_inputs: Inputs judged for this participant.
        n_clean: Inputs without any finding.
    """

    participant: str
    counts: dict[str, int]
    n_inputs: int
    n_clean: int

    @property
    def most_common(self) -> str | None:
        """The most frequent emergence anchor (the earliest among ties), ``None`` if clean."""
        best = max(self.counts.values(), default=0)
        if best == 0:
            return None
        return next(anchor for anchor, count in self.counts.items() if count == best)

    @property
    def earliest(self) -> str | None:
        """The earliest emergence anchor over all inputs, ``None`` if clean."""
        return next((anchor for anchor, count in self.counts.items() if count > 0), None)

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready plain data."""
        return {
            "participant": self.participant,
            "counts": dict(self.counts),
            "n_inputs": self.n_inputs,
            "n_clean": self.n_clean,
            "most_common": self.most_common,
            "earliest": self.earliest,
        }


def emergence_distribution(
    anchors: Sequence[str], findings: Mapping[FindingKey, Iterable[str]]
) -> dict[str, EmergenceDistribution]:
    """Distribute each participant's emergence anchors across its inputs.

    Args:
        anchors: All anchors in topological order.
        findings: ``{(participant, input_id): anchors with a finding}``.

    Returns:
        ``{participant: EmergenceDistribution}`` in order of first appearance.
    """
    counts: dict[str, dict[str, int]] = {}
    n_inputs: dict[str, int] = {}
    n_clean: dict[str, int] = {}
    for emergence in emergences(anchors, findings):
        participant = emergence.participant
        if participant not in counts:
            counts[participant] = dict.fromkeys(anchors, 0)
            n_inputs[participant] = 0
            n_clean[participant] = 0
        n_inputs[participant] += 1
        if emergence.anchor is None:
            n_clean[participant] += 1
        else:
            counts[participant][emergence.anchor] += 1
    return {p: EmergenceDistribution(p, counts[p], n_inputs[p], n_clean[p]) for p in counts}


@dataclass(frozen=True)
class BlameRecord:
    """Library blame for one input.

    Attributes:
        input_id: The input.
        anchor: The earliest anchor where any participant has a finding (``None``: clean).
        participants: The participants flagged by the oracle at ``anchor``, sorted: those
            that deviate from the consensus there, not a pair that disagrees.
        later: ``{participant: its own emergence anchor}`` for participants whose first
            finding for this input comes after ``anchor`` (not blamed for this input).
    """

    input_id: str
    anchor: str | None
    participants: tuple[str, ...]
    later: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready plain data."""
        return {
            "input_id": str(self.input_id),
            "anchor": self.anchor,
            "participants": list(self.participants),
            "later": dict(self.later),
        }


@dataclass(frozen=True)
class LibraryBlame:
    """Which participants the oracle blames, over all inputs.

    Attributes:
        participants: Every participant seen, in order of first appearance.
        records: One :class:`BlameRecord` per input, in order of first appearance.
        counts: ``{participant: inputs where it is blamed, alone or jointly}``.
        sole_counts: ``{participant: inputs where it is the only one blamed}``.
        anchor_counts: ``{participant: {anchor: inputs blamed at that anchor}}`` (non-zero
            entries only, anchors in topological order).
        n_inputs: Inputs judged.
        n_clean: Inputs without a finding for any participant.
        n_joint: Inputs where more than one participant is blamed at the earliest anchor.
    """

    participants: tuple[str, ...]
    records: tuple[BlameRecord, ...]
    counts: dict[str, int]
    sole_counts: dict[str, int]
    anchor_counts: dict[str, dict[str, int]]
    n_inputs: int
    n_clean: int
    n_joint: int

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready plain data."""
        return {
            "participants": list(self.participants),
            "counts": dict(self.counts),
            "sole_counts": dict(self.sole_counts),
            "anchor_counts": {p: dict(c) for p, c in self.anchor_counts.items()},
            "n_inputs": self.n_inputs,
            "n_clean": self.n_clean,
            "n_joint": self.n_joint,
            "records": [record.to_dict() for record in self.records],
        }


def library_blame(
    anchors: Sequence[str], findings: Mapping[FindingKey, Iterable[str]]
) -> LibraryBlame:
    """Blame, per input, the participants flagged at the earliest anchor with any finding.

    The oracle flags a participant when it deviates from the consensus of all
    participants, so the blamed set names the deviating library (or libraries) directly.
    A participant whose first finding for the input comes later is listed in
    :attr:`BlameRecord.later` but not blamed for that input.

    Args:
        anchors: All anchors in topological order.
        findings: ``{(participant, input_id): anchors with a finding}``; every judged
            pair should be present, clean ones with an empty collection.

    Returns:
        The per-input records and the per-participant counts.
    """
    participants: list[str] = []
    by_input: dict[str, dict[str, Emergence]] = {}
    for emergence in emergences(anchors, findings):
        if emergence.participant not in participants:
            participants.append(emergence.participant)
        by_input.setdefault(emergence.input_id, {})[emergence.participant] = emergence

    counts = dict.fromkeys(participants, 0)
    sole_counts = dict.fromkeys(participants, 0)
    anchor_counts: dict[str, dict[str, int]] = {p: {} for p in participants}
    records = []
    n_clean = n_joint = 0
    for input_id, per_participant in by_input.items():
        flagged = [e for e in per_participant.values() if e.position is not None]
        if not flagged:
            records.append(BlameRecord(input_id, None, ()))
            n_clean += 1
            continue
        first = min(e.position for e in flagged if e.position is not None)
        anchor = anchors[first]
        blamed = tuple(sorted(e.participant for e in flagged if e.position == first))
        later = {e.participant: str(e.anchor) for e in flagged if e.participant not in blamed}
        records.append(BlameRecord(input_id, anchor, blamed, later))
        n_joint += len(blamed) > 1
        for participant in blamed:
            counts[participant] += 1
            sole_counts[participant] += len(blamed) == 1
            per_anchor = anchor_counts[participant]
            per_anchor[anchor] = per_anchor.get(anchor, 0) + 1
    anchor_counts = {p: {a: c[a] for a in anchors if a in c} for p, c in anchor_counts.items()}
    return LibraryBlame(
        participants=tuple(participants),
        records=tuple(records),
        counts=counts,
        sole_counts=sole_counts,
        anchor_counts=anchor_counts,
        n_inputs=len(records),
        n_clean=n_clean,
        n_joint=n_joint,
    )
