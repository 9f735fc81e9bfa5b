"""Releases that computed the same thing: bit-identical anchors between versions of a library.

Versions of one library (``onnxruntime@1.17.3`` beside ``onnxruntime``,
:mod:`anpred.library.versions`) are independent votes in the consensus only as far as their
kernels differ. Two releases whose captures are equal bit for bit at every anchor of every
input ran the same arithmetic: the run records it on both participants' records
(:data:`KEY`: the other participants, :data:`BY_KEY`: how it was established) and the
report says so.

Compared: participants of the same library and configuration of which at least one is a
release. With the captures on disk (a run's analysis, before pruning) every anchor array of
every input is compared bit for bit (``captures``); a run judged from stored statistics
(captures pruned, or a run that went in chunks) compares every deviation the oracle computed
(the primary metric and every metric against fp64, at every anchor and input: equal
deviations to the last bit, ``deviations``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from anpred.analysis.verdict import Verdict
from anpred.store import RunStore

#: Record key: the participants whose anchors equal this one's bit for bit.
KEY = "identical_anchors"
#: Record key: how that was established (``captures`` or ``deviations``).
BY_KEY = "identical_by"
#: Marks a release in a participant name (:data:`anpred.library.versions.VERSION_MARK`).
_RELEASE = "@"


def release_groups(records: Iterable[Mapping[str, Any]]) -> list[list[str]]:
    """Participants of one library and configuration, groups holding a release only."""
    groups: dict[tuple[str, str], list[str]] = {}
    for record in records:
        name = str(record.get("participant", ""))
        config = name.partition("[")[2]
        groups.setdefault((str(record.get("library", "")), config), []).append(name)
    return [g for g in groups.values() if len(g) > 1 and any(_RELEASE in n for n in g)]


def identical_pairs(
    store: RunStore,
    groups: Sequence[Sequence[str]],
    input_ids: Sequence[str],
    verdicts: Sequence[Verdict],
    captures: bool,
) -> list[tuple[str, str]]:
    """The pairs of each group whose anchors are bit-identical on every input (from the
    captures when ``captures``, else from the deviations).
    """
    pairs = [pair for group in groups for pair in combinations(group, 2)]
    if not pairs:
        return []
    if not captures:
        marks = _deviation_marks(verdicts)
        return [(a, b) for a, b in pairs if a in marks and marks.get(a) == marks.get(b)]
    same = dict.fromkeys(pairs, True)
    for input_id in input_ids:
        loaded: dict[str, dict[str, np.ndarray] | None] = {}
        for a, b in [p for p in pairs if same[p]]:
            left, right = (loaded.setdefault(n, _capture(store, n, input_id)) for n in (a, b))
            same[(a, b)] = left is not None and right is not None and _equal(left, right)
    return [pair for pair, equal in same.items() if equal]


def mark_identical(
    records: Sequence[dict[str, Any]], pairs: Sequence[tuple[str, str]], by: str
) -> None:
    """Record ``pairs`` on the participants' records (in place)."""
    for record in records:
        name = record.get("participant")
        others = [b if a == name else a for a, b in pairs if name in (a, b)]
        if others:
            record[KEY] = others
            record[BY_KEY] = by


def _capture(store: RunStore, name: str, input_id: str) -> dict[str, np.ndarray] | None:
    try:
        return store.participant(name).load_capture(input_id)
    except (FileNotFoundError, OSError, ValueError):
        return None


def _equal(left: Mapping[str, np.ndarray], right: Mapping[str, np.ndarray]) -> bool:
    if set(left) != set(right):
        return False
    for key, value in left.items():
        other = right[key]
        if value.dtype != other.dtype or value.shape != other.shape:
            return False
        if value.tobytes() != other.tobytes():  # bit for bit: NaN payloads and -0.0 too
            return False
    return True


def _deviation_marks(verdicts: Sequence[Verdict]) -> dict[str, tuple]:
    """Participant → every deviation the oracle computed for it, in a fixed order."""
    rows: dict[str, list[tuple]] = {}
    for v in verdicts:
        fp64 = tuple(sorted((k, float(x)) for k, x in v.vs_fp64.items()))
        rows.setdefault(v.participant, []).append(
            (v.anchor, v.input_id, float(v.primary.value), fp64)
        )
    return {p: tuple(sorted(r, key=repr)) for p, r in rows.items()}
