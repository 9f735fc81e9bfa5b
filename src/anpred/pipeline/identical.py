"""Releases of one library compared bit for bit: identical anchors, or the first that differs.

Versions of one library (``onnxruntime@1.17.3`` beside ``onnxruntime``,
:mod:`anpred.library.versions`) are independent votes in the consensus only as far as their
kernels differ. Two releases whose captures are equal bit for bit at every anchor of every
input ran the same arithmetic: the run records it on both participants' records (under the
keys of :mod:`anpred.store.summary_records`: ``KEY``, the other participants, ``BY_KEY``,
how it was established) and the report says so. Two releases that differ are recorded with
the first anchor, in topological order, where they differ on any input (``DIFFERS_KEY``):
the numerics that changed between the releases are in the stage that ends there
(everything before it is bit for bit the same), which answers "we moved from X to Y and the
numbers changed: where?" without a finding.

Compared: participants of the same library and configuration of which at least one is a
release. With the captures on disk (a run's analysis, before pruning) every anchor array of
every input is compared bit for bit (``captures``); a run judged from stored statistics
(captures pruned, or a run that went in chunks) compares the deviations the oracle computed
at each anchor and input (the primary metric and every metric against fp64, equal to the
last bit: ``deviations``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from anpred.analysis.verdict import Verdict
from anpred.errors import UsageError
from anpred.store import RunStore
from anpred.store.outcome import FINISHED_STATES
from anpred.store.summary_records import BY_KEY, DIFFERS_KEY, KEY

Json = dict[str, Any]

#: Marks a release in a participant name (:data:`anpred.library.versions.VERSION_MARK`).
_RELEASE = "@"


@dataclass(frozen=True)
class Comparison:
    """Two participants of one library compared anchor by anchor.

    Attributes:
        pair: The two participants.
        differs_at: The first anchor (topological order) that differs on some input;
            ``None``: bit-identical everywhere.
        index: Its place in the anchor order.
        max_abs_diff: The largest absolute difference there (``None`` from deviations).
    """

    pair: tuple[str, str]
    differs_at: str | None
    index: int | None = None
    max_abs_diff: float | None = None


def release_groups(records: Iterable[Mapping[str, Any]]) -> list[list[str]]:
    """Participants of one library and configuration that finished, groups holding a
    release only.
    """
    groups: dict[tuple[str, str], list[str]] = {}
    for record in records:
        if record.get("status") not in FINISHED_STATES:
            continue
        name = str(record.get("participant", ""))
        config = name.partition("[")[2]
        groups.setdefault((str(record.get("library", "")), config), []).append(name)
    return [g for g in groups.values() if len(g) > 1 and any(_RELEASE in n for n in g)]


def compare_releases(
    store: RunStore,
    groups: Sequence[Sequence[str]],
    anchors: Sequence[str],
    input_ids: Sequence[str],
    verdicts: Sequence[Verdict],
    captures: bool,
) -> list[Comparison]:
    """Every pair of each group compared (from the captures when ``captures``, else from
    the deviations).
    """
    pairs = [pair for group in groups for pair in combinations(group, 2)]
    if not captures:
        marks = _deviation_marks(verdicts)
        return [_by_deviations(pair, anchors, marks) for pair in pairs]
    first: dict[tuple[str, str], int] = dict.fromkeys(pairs, len(anchors))
    worst: dict[tuple[str, str], float] = dict.fromkeys(pairs, 0.0)
    for input_id in input_ids:
        loaded: dict[str, dict[str, np.ndarray] | None] = {}
        for a, b in pairs:
            left, right = (loaded.setdefault(n, _capture(store, n, input_id)) for n in (a, b))
            index, diff = _first_difference(left, right, anchors)
            if index < first[(a, b)]:
                first[(a, b)], worst[(a, b)] = index, diff
            elif index == first[(a, b)] < len(anchors):
                worst[(a, b)] = max(worst[(a, b)], diff)
    return [
        Comparison(p, anchors[first[p]], first[p], worst[p]) if first[p] < len(anchors)
        else Comparison(p, None)
        for p in pairs
    ]  # fmt: skip


def stage_operators(export: Mapping[str, Any], stages: Iterable[str]) -> dict[str, Json]:
    """``{stage: {"stage_ops": {op type: count}, "operator": node or None}}`` of the run's
    anchored graph (``export``: the run's export record); ``{}`` when it cannot be read.
    """
    import onnx

    from anpred.inject.plan import stage_anchors
    from anpred.inject.stages import node_stages, stage_ops
    from anpred.interchange.export import AnchoredExport

    wanted = set(stages)
    try:
        anchored = AnchoredExport.from_dict(dict(export))
        model = onnx.load(str(anchored.anchored_path))
        anchors = stage_anchors(anchored)
        counts, where = stage_ops(model, anchors), node_stages(model, anchors)
    except (OSError, ValueError, KeyError, UsageError):
        return {}
    found = {}
    for stage in wanted & set(counts):
        nodes = [k for k, s in where.items() if s == stage]
        ops = dict(sorted(counts[stage].items()))
        single = nodes[0] if len(nodes) == 1 and sum(ops.values()) == 1 else None
        found[stage] = {"stage_ops": ops, "operator": single}
    return found


def mark_releases(
    records: Sequence[dict[str, Any]],
    comparisons: Sequence[Comparison],
    by: str,
    stages: Mapping[str, Json] | None = None,
) -> None:
    """Record ``comparisons`` on the participants' records (in place), with what the stage
    where two releases first differ holds (``stages``: :func:`stage_operators`).
    """
    for record in records:
        name = record.get("participant")
        mine = [c for c in comparisons if name in c.pair]
        if not mine:
            continue
        record[BY_KEY] = by
        same = [_other(c, name) for c in mine if c.differs_at is None]
        if same:
            record[KEY] = same
        differing = {
            _other(c, name): {
                "anchor": c.differs_at,
                "index": c.index,
                "max_abs_diff": c.max_abs_diff,
                **(stages or {}).get(str(c.differs_at), {}),
            }
            for c in mine
            if c.differs_at is not None
        }
        if differing:
            record[DIFFERS_KEY] = differing


def _other(comparison: Comparison, name: Any) -> str:
    a, b = comparison.pair
    return b if a == name else a


def _capture(store: RunStore, name: str, input_id: str) -> dict[str, np.ndarray] | None:
    try:
        return store.participant(name).load_capture(input_id)
    except (FileNotFoundError, OSError, ValueError):
        return None


def _first_difference(
    left: Mapping[str, np.ndarray] | None,
    right: Mapping[str, np.ndarray] | None,
    anchors: Sequence[str],
) -> tuple[int, float]:
    """Index of the first anchor where the captures differ bit for bit (``len(anchors)``:
    none) and the largest absolute difference there (``inf``: missing or other shapes).
    """
    if left is None or right is None:
        return 0, float("inf")
    for index, key in enumerate(anchors):
        a, b = left.get(key), right.get(key)
        if a is None or b is None or a.dtype != b.dtype or a.shape != b.shape:
            return index, float("inf")
        if a.tobytes() != b.tobytes():  # bit for bit: NaN payloads and -0.0 too
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            finite = diff[np.isfinite(diff)]
            return index, float(finite.max()) if finite.size else float("inf")
    return len(anchors), 0.0


def _deviation_marks(verdicts: Sequence[Verdict]) -> dict[str, dict[tuple[str, str], tuple]]:
    """Participant → (anchor, input) → every deviation the oracle computed there."""
    marks: dict[str, dict[tuple[str, str], tuple]] = {}
    for v in verdicts:
        fp64 = tuple(sorted((k, float(x)) for k, x in v.vs_fp64.items()))
        marks.setdefault(v.participant, {})[(v.anchor, v.input_id)] = (v.primary.value, fp64)
    return marks


def _by_deviations(
    pair: tuple[str, str], anchors: Sequence[str], marks: Mapping[str, Mapping]
) -> Comparison:
    left, right = marks.get(pair[0], {}), marks.get(pair[1], {})
    for index, anchor in enumerate(anchors):
        keys = {k for k in (*left, *right) if k[0] == anchor}
        if not keys or any(left.get(k) != right.get(k) for k in keys):
            return Comparison(pair, anchor, index)
    return Comparison(pair, None)
