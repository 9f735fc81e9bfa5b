"""Which stage each node of an anchored ONNX graph belongs to, and which nodes a fault hits.

The stage of a node is the earliest anchor (in the export's anchor order) that depends on
it in the isolation graph (the graph cut at every anchor, see
:mod:`anpred.interchange.isolation`): the computation between consecutive anchors. A node
no anchor depends on (dead code) has no stage, nor has a node that unpacks the several inputs
of a user's model from its one packed input (:mod:`anpred.interchange.packing`).

Nodes are identified by name, or by their first output when unnamed — the name the
interpreter gives them (:class:`~anpred.translate.registry.NodeCall`), the same in the
anchored, plain and isolation graphs of an export.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import onnx

from anpred.errors import UsageError
from anpred.inject.spec import ANY_OP, FaultSpec, fault_kind
from anpred.interchange.isolation import isolation_model
from anpred.interchange.loaded import facts_of
from anpred.interchange.packing import is_unpack_node

#: Ops never targeted: constants are folded before any library runs them.
_NEVER = frozenset({"Constant"})

_FLOAT = onnx.TensorProto.FLOAT


@dataclass(frozen=True)
class StageAnchor:
    """An anchor as stage mapping needs it: its key and the ONNX tensor it is."""

    key: str
    onnx_name: str


def node_key(node: onnx.NodeProto) -> str:
    """The identifier of a node: its name, or its first output when it has none."""
    return node.name or node.output[0]


def node_stages(model: onnx.ModelProto, anchors: Sequence[StageAnchor]) -> dict[str, str]:
    """Map every node of the anchored ``model`` that some anchor depends on to its stage.

    Args:
        model: The anchored ONNX model (anchors are graph outputs).
        anchors: The anchors in the export's (topological) order.

    Returns:
        Node key → anchor key of its stage.
    """
    cut, _ = isolation_model(model, [a.onnx_name for a in anchors])
    producer = {out: node for node in cut.graph.node for out in node.output if out}
    stages: dict[str, str] = {}
    for anchor in anchors:
        stack = [anchor.onnx_name]
        seen: set[str] = set()
        while stack:
            name = stack.pop()
            node = producer.get(name)
            if node is None or node_key(node) in seen or is_unpack_node(node):
                continue  # unpacking several model inputs belongs to no stage
            seen.add(node_key(node))
            stages.setdefault(node_key(node), anchor.key)
            stack.extend(i for i in node.input if i)
    return stages


def _stages_and_floats(
    model: onnx.ModelProto, anchors: Sequence[StageAnchor]
) -> tuple[dict[str, str], set[str]]:
    """:func:`node_stages` and the float32 values of ``model``, once per model object (a
    campaign plans all the faults of a model on one, :mod:`anpred.interchange.loaded`).
    """
    key = ("stages and floats", tuple(anchors))
    return facts_of(model, key, lambda: (node_stages(model, anchors), _float_outputs(model)))


def _float_outputs(model: onnx.ModelProto) -> set[str]:
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    return {
        vi.name
        for vi in [*graph.value_info, *graph.output, *graph.input]
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type == _FLOAT
    }


def stage_ops(model: onnx.ModelProto, anchors: Sequence[StageAnchor]) -> dict[str, Counter[str]]:
    """Count the op types of every stage (anchor order), for listings and error messages."""
    stages = node_stages(model, anchors)
    counts: dict[str, Counter[str]] = {a.key: Counter() for a in anchors}
    for node in model.graph.node:
        stage = stages.get(node_key(node))
        if stage is not None and node.op_type not in _NEVER:
            counts[stage][node.op_type] += 1
    return counts


def resolve_targets(
    model: onnx.ModelProto, anchors: Sequence[StageAnchor], spec: FaultSpec
) -> list[str]:
    """Return the keys of the nodes ``spec`` applies to, in graph order.

    A node is targeted when it is in the fault's stage, its op matches (``"*"``: any op
    the kind applies to), it is not a ``Constant``, and it has a float32 output (operand
    faults: a float32 input).

    Raises:
        UsageError: Unknown stage, or no node matches (the message lists the stage's ops).
    """
    kind = fault_kind(spec.kind)
    kind.check(spec)
    keys = [a.key for a in anchors]
    if spec.stage not in keys:
        raise UsageError(f"unknown stage {spec.stage!r}; the anchors are {', '.join(keys)}")
    stages, floats = _stages_and_floats(model, anchors)
    targets = []
    present: Counter[str] = Counter()
    if spec.node is not None:
        _check_node(model, stages, spec)
    for node in model.graph.node:
        if stages.get(node_key(node)) != spec.stage or node.op_type in _NEVER:
            continue
        if spec.node is not None and node_key(node) != spec.node:
            continue
        present[node.op_type] += 1
        if spec.op not in (ANY_OP, node.op_type) or not kind.applies_to(node.op_type):
            continue
        if kind.ops is None and not any(o in floats for o in node.output):
            continue  # integer / boolean results (shapes, masks) are not faulted
        targets.append(node_key(node))
    if not targets and spec.node is not None:
        raise UsageError(
            f"fault {spec.kind} does not apply to node {spec.node!r} "
            "(its outputs are not float32, or the kind does not act on its op)"
        )
    if not targets:
        ops = ", ".join(f"{op}×{n}" for op, n in sorted(present.items())) or "no ops"
        raise UsageError(
            f"fault {spec.kind} on {spec.op} matches no node of stage {spec.stage!r} (it has {ops})"
        )
    return targets


def _check_node(model: onnx.ModelProto, stages: dict[str, str], spec: FaultSpec) -> None:
    """Refuse a ``--node`` that is not in the graph, not in the stage, or not of the op.

    Raises:
        UsageError: With what the node is, or which stage lists the nodes.
    """
    node = next((n for n in model.graph.node if node_key(n) == spec.node), None)
    if node is None:
        raise UsageError(
            f"no node {spec.node!r} in the graph (`anpred inject MODEL --list-targets "
            f"--stage {spec.stage}` lists the stage's nodes)"
        )
    stage = stages.get(spec.node)
    if stage != spec.stage:
        raise UsageError(f"node {spec.node!r} is in stage {stage!r}, not {spec.stage!r}")
    if spec.op not in (ANY_OP, node.op_type):
        raise UsageError(f"node {spec.node!r} is a {node.op_type}, not a {spec.op}")


def stage_nodes(
    model: onnx.ModelProto, anchors: Sequence[StageAnchor], stage: str
) -> list[tuple[str, str, bool]]:
    """The nodes of one stage, graph order: ``(node key, op type, has a float32 output)``.

    Raises:
        UsageError: Unknown stage.
    """
    keys = [a.key for a in anchors]
    if stage not in keys:
        raise UsageError(f"unknown stage {stage!r}; the anchors are {', '.join(keys)}")
    stages, floats = _stages_and_floats(model, anchors)
    return [
        (node_key(n), n.op_type, any(o in floats for o in n.output))
        for n in model.graph.node
        if stages.get(node_key(n)) == stage and n.op_type not in _NEVER
    ]


def stage_of_node(model: onnx.ModelProto, anchors: Sequence[StageAnchor], node: str) -> str:
    """The stage of node ``node``.

    Raises:
        UsageError: No such node, or no anchor depends on it.
    """
    stage = node_stages(model, anchors).get(node)
    if stage is None:
        raise UsageError(
            f"no node {node!r} in any stage (`anpred inject MODEL --list-targets --stage "
            "STAGE` lists a stage's nodes)"
        )
    return stage
