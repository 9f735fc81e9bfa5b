"""Drill-down: from a flagged stage to the first operator that introduces the error.

For every flagged (participant, stage) the drill-down (:mod:`anpred.pipeline.drill`)
re-runs only that stage, in every participant, from the fp64 reference's stage input, with
every operator output exposed. Each operator output is then judged like an anchor by the
oracle (:func:`~anpred.analysis.oracle.judge_anchor`): its chain value (the stage run
from its exact input up to that operator) against the population of participants, and its
*introduced* error (the operator run on the fp64 reference's values of its own inputs)
against the population of introduced errors and the fp32 reference's
(:attr:`~anpred.analysis.verdict.Criterion.INTRODUCED`).

The named operator is the first one, in graph order, whose introduced error stands out on
at least half of the inputs (basis ``introduced``); when none does (e.g. only two
participants, where introduced errors are not judged), the first operator whose chain
value is a finding on at least half of the inputs (basis ``finding``); else none, with
the reason.

The **layer** level (:func:`drill_layers`, :func:`named_layer`) groups a stage's operator
chain by torch module (the layers one level below what all the stage's operators share:
``layer2.0`` .. ``layer2.3`` in ResNet's ``layer2``, ``model.3``/``model.4`` in YOLO's
``backbone.p3``). A layer's output is its last operator's output, so its verdict is that
operator's: the layer view is read from the recorded operator chain, with no job or
capture of its own, and names the layer of the first operator that introduces error.

This module is pure: it takes verdicts and returns records (no DL library, no files).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from anpred.analysis.verdict import Criterion, Verdict
from anpred.store.summary_drill import DrillOp, DrillTarget
from anpred.store.summary_records import Finding

#: Exceeded criteria (``Finding.metrics["exceeded"]``) that make a stage worth drilling
#: into although it is not the participant's first flagged anchor.
_INTRODUCED = Criterion.INTRODUCED.value


@dataclass(frozen=True)
class OpInfo:
    """What the drill-down knows of one operator anchor (from the drill graph)."""

    key: str
    node: str
    op_type: str
    module: str | None
    stage: str


def drill_targets(
    findings: Iterable[Finding], anchors: Sequence[str], max_stages: int | None = None
) -> dict[str, list[str]]:
    """The stages to drill into, per flagged participant (anchor order).

    A participant's stage is drilled when it is where its findings emerge on some input
    (its first flagged anchor) or where its introduced error stands out
    (:attr:`Criterion.INTRODUCED`): the stages that add error, not those that only
    inherit it.

    Args:
        findings: The run's findings.
        anchors: Anchor keys in order.
        max_stages: At most this many stages per participant (the earliest); ``None``: all.
    """
    order = {a: i for i, a in enumerate(anchors)}
    first: dict[tuple[str, str], str] = {}
    chosen: dict[str, set[str]] = {}
    for f in findings:
        if f.anchor not in order:
            continue
        key = (f.participant, f.input)
        if key not in first or order[f.anchor] < order[first[key]]:
            first[key] = f.anchor
        if _INTRODUCED in str(f.metrics.get("exceeded", "")).split(","):
            chosen.setdefault(f.participant, set()).add(f.anchor)
    for (participant, _), anchor in first.items():
        chosen.setdefault(participant, set()).add(anchor)
    return {
        p: sorted(stages, key=order.__getitem__)[:max_stages]
        for p, stages in sorted(chosen.items())
    }


def _median(values: Iterable[float | None]) -> float | None:
    found = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(found) if found else None


def _stands_out(v: Verdict) -> bool:
    return Criterion.INTRODUCED in v.exceeded


def judge_target(
    participant: str,
    stage: str,
    ops: Sequence[OpInfo],
    verdicts: Mapping[tuple[str, str, str], Verdict],
    input_ids: Sequence[str],
) -> DrillTarget:
    """The operator chain of one flagged (participant, stage) and the operator named.

    Args:
        participant: The flagged participant.
        stage: The flagged stage.
        ops: The stage's operators, graph order.
        verdicts: ``{(participant, op key, input): verdict}`` of the drill-down.
        input_ids: The inputs.
    """
    needed = max(1, math.ceil(len(input_ids) / 2))
    records = []
    for op in ops:
        mine = [
            verdicts[(participant, op.key, i)]
            for i in input_ids
            if (participant, op.key, i) in verdicts
        ]
        records.append(
            DrillOp(
                key=op.key,
                node=op.node,
                op_type=op.op_type,
                module=op.module,
                introduced=_median(v.introduced.value for v in mine if v.introduced),
                threshold=_median(v.introduced.threshold for v in mine if v.introduced),
                stands_out=sum(_stands_out(v) for v in mine) >= needed,
                chain=_median(v.vs_fp64.get(v.primary.metric) for v in mine),
                finding=sum(v.finding for v in mine) >= needed,
            )
        )
    judged = any((participant, op.key, i) in verdicts for op in ops for i in input_ids)
    if not judged:
        return DrillTarget(
            participant,
            stage,
            tuple(records),
            None,
            None,
            "no drill-down capture of this participant",
        )
    for basis, test in (("introduced", lambda r: r.stands_out), ("finding", lambda r: r.finding)):
        named = next((r for r in records if test(r)), None)
        if named is not None:
            return DrillTarget(participant, stage, tuple(records), named.key, basis)
    if all(r.introduced is None for r in records):
        reason = (
            "no operator's output is flagged, and introduced errors could not be judged "
            "(two participants only: a pairwise comparison has no population)"
        )
    else:
        reason = (
            "no operator of the stage stands out on its own: the error is spread over "
            "several operators, or too small at operator level for the population"
        )
    return DrillTarget(participant, stage, tuple(records), None, None, reason)


@dataclass(frozen=True)
class DrillLayer:
    """One layer (torch module) of a drilled stage's operator chain, for one participant.

    Attributes:
        module: The layer's module path (``layer2.1``, ``model.4``).
        ops: Its operators' keys, graph order.
        output: Key of its last operator, whose output is the layer's output.
        chain: Error at the layer's output (the output operator's chain value).
        finding: Whether the layer's output is flagged (the output operator's verdict).
        introducing: Keys of its operators whose own introduced error stands out.
    """

    module: str
    ops: tuple[str, ...]
    output: str
    chain: float | None
    finding: bool
    introducing: tuple[str, ...]


def _components(module: str | None) -> list[str]:
    return module.split(".") if module else []


def _layer_depth(modules: Sequence[list[str]]) -> int | None:
    """How many module-path components name a layer: one more than the stage's operators
    share, deepened while that gives a single layer. ``None``: no module paths.
    """
    paths = [m for m in modules if m]
    if not paths:
        return None
    shared = 0
    while all(len(m) > shared and m[shared] == paths[0][shared] for m in paths):
        shared += 1
    depth = shared + 1
    while len({tuple(m[:depth]) for m in paths}) == 1 and any(len(m) > depth for m in paths):
        depth += 1
    return depth


def drill_layers(ops: Sequence[DrillOp]) -> tuple[DrillLayer, ...]:
    """A stage's operator chain grouped into layers, in the order their first operator runs.

    An operator without a module path (an exporter's helper node) joins the layer of the
    operator before it. Empty when no operator carries a module path (an ONNX file without
    torch scopes).
    """
    depth = _layer_depth([_components(o.module) for o in ops])
    if depth is None:
        return ()
    members: dict[str, list[DrillOp]] = {}
    current: str | None = None
    for op in ops:
        parts = _components(op.module)
        if parts:
            current = ".".join(parts[:depth])
        members.setdefault(current or "-", []).append(op)
    layers = []
    for module, group in members.items():
        last = group[-1]
        layers.append(
            DrillLayer(
                module,
                tuple(o.key for o in group),
                last.key,
                last.chain,
                last.finding,
                tuple(o.key for o in group if o.stands_out),
            )
        )
    return tuple(layers)


def named_layer(target: DrillTarget) -> tuple[DrillLayer | None, str | None]:
    """The layer the drill-down names in ``target``, and why.

    The layer of the named operator (basis ``introduced`` or ``finding``, as the
    operator's): the first layer holding an operator that introduces error, or else the
    first whose chain is flagged from that operator on. With no operator named, the
    first layer whose output is flagged (basis ``output``); else ``None``.
    """
    layers = drill_layers(target.ops)
    if target.named is not None:
        layer = next((x for x in layers if target.named in x.ops), None)
        return (layer, target.basis) if layer is not None else (None, None)
    flagged = next((x for x in layers if x.finding), None)
    return (flagged, "output") if flagged is not None else (None, None)
