"""Resumed graphs: recompute only the anchors a change reaches, from given anchor values.

A fault run changes a few nodes of one participant's graph. Every anchor that does not
depend on them is the clean run's, bit for bit (a participant is deterministic), so the
fault run recomputes only the anchors downstream of the changed nodes (:func:`footprint`),
fed with the clean run's values of the others: a graph cut at the fed anchors and pruned
to what the recomputed ones need (:func:`resumed_model`). The same cut, fed the fp64
reference's anchors, gives the stage-isolated anchors the change reaches (in the isolation
graph, :mod:`anpred.interchange.isolation`, usually the faulty stage's own anchor only).

A value the pruned graph still computes before the fed anchors (a tensor that crosses a
stage boundary without being an anchor) is computed from the same inputs by the same
nodes as in the whole graph. Runners build these graphs
(:meth:`anpred.backends.base.Runner.resume`); the worker merges what they return with the
clean capture (:mod:`anpred.execution.worker`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np
import onnx

from anpred.interchange.export import AnchoredExport
from anpred.interchange.isolation import fed_name, isolation_model
from anpred.translate.subgraphs import graph_attributes, outer_names


def _node_key(node: onnx.NodeProto) -> str:
    """A node's identifier: its name, or its first output (as faults name nodes)."""
    return node.name or node.output[0]


def _reads(node: onnx.NodeProto) -> list[str]:
    """Every value ``node`` reads: its inputs and what its subgraphs read from outside."""
    names = [n for n in node.input if n]
    for _, body in graph_attributes(node):
        names += outer_names(body)
    return names


def footprint(
    model: onnx.ModelProto, anchors: Sequence[str], nodes: Collection[str], isolated: bool
) -> list[str]:
    """The anchors that depend on ``nodes``, in ``anchors``' order.

    Args:
        model: The anchored ONNX model.
        anchors: ONNX names of its anchor tensors, in the export's order.
        nodes: Keys of the changed nodes (name, or first output when unnamed).
        isolated: Follow the isolation graph (every anchor cut: what the stage-isolated
            inference recomputes) instead of the anchored one.

    Returns:
        ONNX names of the anchors to recompute.
    """
    graph = isolation_model(model, anchors)[0].graph if isolated else model.graph
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in dict.fromkeys(_reads(node)):
            consumers.setdefault(name, []).append(node)
    reached: set[str] = set()
    stack = [out for node in graph.node if _node_key(node) in nodes for out in node.output if out]
    while stack:
        name = stack.pop()
        if name in reached:
            continue
        reached.add(name)
        for node in consumers.get(name, ()):
            stack.extend(out for out in node.output if out and out not in reached)
    return [a for a in anchors if a in reached]


def resumed_model(
    model: onnx.ModelProto, fed: Sequence[str], outputs: Sequence[str]
) -> tuple[onnx.ModelProto, list[str]]:
    """``model`` computing only ``outputs``, every anchor of ``fed`` read from a new input.

    Args:
        model: The anchored ONNX model (anchors are graph outputs).
        fed: ONNX names of the anchors given at run time: each consumer reads the graph
            input ``fed_name(name)`` instead (a subgraph reading one from its enclosing
            scope keeps reading the computed value, the same). Every anchor fed: the
            isolation graph's cut.
        outputs: ONNX names of the anchors to compute (by their own nodes, also when fed:
            their consumers read the fed value).

    Returns:
        The pruned model (nodes the outputs do not need removed, and the inputs and
        initializers nothing reads) and its run-time inputs, in order: the model's own
        inputs it still reads, then the fed anchors' inputs.

    Raises:
        ValueError: An output is no value the graph computes.
    """
    cuts = set(fed)
    cut = onnx.ModelProto()
    cut.CopyFrom(model)
    graph = cut.graph
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name in cuts:
                node.input[index] = fed_name(name)
    producer = {out: i for i, node in enumerate(graph.node) for out in node.output if out}
    missing = [o for o in outputs if o not in producer]
    if missing:
        raise ValueError(f"no node computes {', '.join(missing)}")
    keep: set[int] = set()
    read: set[str] = set()
    stack = list(outputs)
    while stack:
        index = producer.get(stack.pop())
        if index is None or index in keep:
            continue
        keep.add(index)
        names = _reads(graph.node[index])
        read.update(names)
        stack.extend(names)
    kept = [node for i, node in enumerate(graph.node) if i in keep]
    del graph.node[:]
    graph.node.extend(kept)
    infos = {vi.name: vi for vi in [*model.graph.output, *model.graph.value_info]}
    new_outputs = [infos[o] for o in outputs]
    del graph.output[:]
    graph.output.extend(new_outputs)
    initializers = [init for init in graph.initializer if init.name in read]
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    own = {init.name for init in initializers}
    inputs = [vi for vi in graph.input if vi.name in read]
    for name in fed:
        if fed_name(name) in read:
            vi = onnx.ValueInfoProto()
            vi.CopyFrom(infos[name])
            vi.name = fed_name(name)
            inputs.append(vi)
    del graph.input[:]
    graph.input.extend(inputs)
    return cut, [vi.name for vi in inputs if vi.name not in own]


def export_resumed(
    export: AnchoredExport, fed: Sequence[str], outputs: Sequence[str]
) -> tuple[onnx.ModelProto, list[str]]:
    """:func:`resumed_model` of ``export``'s anchored graph, anchors named by key.

    Returns:
        The model and its run-time inputs (:func:`resumed_model`).
    """
    by_key = {a.key: a.onnx_name for a in export.anchors}
    model = onnx.load(str(export.anchored_path))
    return resumed_model(model, [by_key[k] for k in fed], [by_key[k] for k in outputs])


def resumed_feeds(
    export: AnchoredExport,
    inputs: Sequence[str],
    feed: np.ndarray,
    fed: Mapping[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """The values of a resumed model's run-time ``inputs``: ``feed`` for the model's input,
    ``fed[key]`` for an anchor's.
    """
    by_fed = {fed_name(a.onnx_name): a.key for a in export.anchors}
    return {n: feed if n == export.input_name else fed[by_fed[n]] for n in inputs}
