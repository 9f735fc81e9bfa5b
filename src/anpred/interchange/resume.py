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

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np
import onnx

from anpred.interchange.export import AnchoredExport
from anpred.interchange.isolation import fed_name
from anpred.interchange.loaded import facts_of, load_shared
from anpred.translate.subgraphs import graph_attributes, outer_names

#: A runner's program of a resumed model (a session, a compiled model, a graph program).
P = TypeVar("P")


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
    cut = set(anchors) if isolated else set()  # in the isolation graph, consumers read them fed
    # once per shared model (a campaign plans every fault of a model on the same one)
    direct, outer = facts_of(model, "consumers", lambda: _consumers(model))
    reached: set[str] = set()
    stack = [o for node in model.graph.node if _node_key(node) in nodes for o in node.output if o]
    while stack:
        name = stack.pop()
        if name in reached:
            continue
        reached.add(name)
        readers = [*outer.get(name, ()), *(() if name in cut else direct.get(name, ()))]
        for node in readers:
            stack.extend(out for out in node.output if out and out not in reached)
    return [a for a in anchors if a in reached]


def _consumers(
    model: onnx.ModelProto,
) -> tuple[dict[str, list[onnx.NodeProto]], dict[str, list[onnx.NodeProto]]]:
    """Every value's readers: as a node input, and from inside a subgraph (never fed,
    :mod:`anpred.interchange.isolation`).
    """
    direct: dict[str, list[onnx.NodeProto]] = {}
    outer: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in dict.fromkeys(n for n in node.input if n):
            direct.setdefault(name, []).append(node)
        for name in dict.fromkeys(_reads(node)[len([n for n in node.input if n]) :]):
            outer.setdefault(name, []).append(node)
    return direct, outer


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
    source = model.graph
    producer = {out: i for i, node in enumerate(source.node) for out in node.output if out}
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
        node = source.node[index]
        direct = [fed_name(n) if n in cuts else n for n in node.input if n]
        outer = _reads(node)[len(direct) :]  # subgraphs read the computed values
        read.update(direct + outer)
        stack.extend(direct + outer)
    cut = _header(model)  # only what is kept is copied (the model may be shared, and large)
    graph = cut.graph
    graph.name = source.name
    for i in sorted(keep):
        node = graph.node.add()
        node.CopyFrom(source.node[i])
        for index, name in enumerate(node.input):
            if name in cuts:
                node.input[index] = fed_name(name)
    infos = {vi.name: vi for vi in [*source.output, *source.value_info]}
    graph.output.extend(infos[o] for o in outputs)
    graph.value_info.extend(source.value_info)
    graph.initializer.extend(init for init in source.initializer if init.name in read)
    own = {init.name for init in graph.initializer}
    inputs = [vi for vi in source.input if vi.name in read]
    for name in dict.fromkeys(fed):
        if fed_name(name) in read:
            vi = onnx.ValueInfoProto()
            vi.CopyFrom(infos[name])
            vi.name = fed_name(name)
            inputs.append(vi)
    graph.input.extend(inputs)
    return cut, [vi.name for vi in inputs if vi.name not in own]


def _header(model: onnx.ModelProto) -> onnx.ModelProto:
    """A model with every field of ``model`` but its graph."""
    header = onnx.ModelProto()
    for field, value in model.ListFields():
        if field.name == "graph":
            continue
        if hasattr(value, "extend"):  # a repeated field
            getattr(header, field.name).extend(value)
        elif hasattr(value, "CopyFrom"):  # a message
            getattr(header, field.name).CopyFrom(value)
        else:
            setattr(header, field.name, value)
    return header


@dataclass
class _Provided:
    """The anchored graph given for a path by :func:`provide_anchored`."""

    path: str
    make: Callable[[], onnx.ModelProto]
    model: onnx.ModelProto | None = None

    def holds(self, path: str | os.PathLike[str]) -> bool:
        return self.path == os.path.realpath(path)


#: What :func:`provide_anchored` gave last (one at a time: a worker's job).
_provided: _Provided | None = None


def provide_anchored(path: str | os.PathLike[str], make: Callable[[], onnx.ModelProto]) -> None:
    """Let :func:`export_resumed` take the anchored graph at ``path`` from ``make()`` (called
    once, when first needed) instead of the file, which need not exist: a resumed worker
    rewrites its faulty graph from the clean one it holds (:mod:`anpred.execution.resumed`).
    Replaces what was provided before.
    """
    global _provided
    _provided = _Provided(os.path.realpath(path), make)


def provided_anchored(path: str | os.PathLike[str]) -> onnx.ModelProto | None:
    """The graph provided for ``path`` if it was made already, else ``None``."""
    return _provided.model if _provided is not None and _provided.holds(path) else None


def _anchored(path: Path) -> onnx.ModelProto:
    if _provided is not None and _provided.holds(path):
        if _provided.model is None:
            _provided.model = _provided.make()
        return _provided.model
    return load_shared(path)  # a served process's faults share the clean one


def export_resumed(
    export: AnchoredExport, fed: Sequence[str], outputs: Sequence[str]
) -> tuple[onnx.ModelProto, list[str]]:
    """:func:`resumed_model` of ``export``'s anchored graph (the provided one, if any:
    :func:`provide_anchored`), anchors named by key.

    Returns:
        The model and its run-time inputs (:func:`resumed_model`).
    """
    by_key = {a.key: a.onnx_name for a in export.anchors}
    model = _anchored(export.anchored_path)
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


class ResumedGraphs(Generic[P]):
    """A runner's resumed programs, one per (fed anchors, outputs), built on first use.

    Args:
        export: The job's export (its anchored graph, faulted or not).
        build: Makes the runner's program of a resumed model, given the model, its
            run-time inputs and the ONNX names of its outputs.
    """

    def __init__(
        self, export: AnchoredExport, build: Callable[[onnx.ModelProto, list[str], list[str]], P]
    ) -> None:
        self.export = export
        self.build = build
        self._onnx = {a.key: a.onnx_name for a in export.anchors}
        self._built: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[P, list[str]]] = {}

    def get(self, fed: Sequence[str], outputs: Sequence[str]) -> tuple[P, list[str]]:
        """The program that computes anchors ``outputs`` with ``fed`` given (keys), and its
        run-time inputs.
        """
        key = (tuple(fed), tuple(outputs))
        if key not in self._built:
            model, inputs = export_resumed(self.export, fed, outputs)
            self._built[key] = (self.build(model, inputs, self.names(outputs)), inputs)
        return self._built[key]

    def names(self, outputs: Sequence[str]) -> list[str]:
        """The ONNX names of anchors ``outputs``."""
        return [self._onnx[k] for k in outputs]

    def feeds(
        self, inputs: Sequence[str], feed: np.ndarray, fed: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """:func:`resumed_feeds` of this export."""
        return resumed_feeds(self.export, inputs, feed, fed)

    def programs(self) -> list[P]:
        """The programs built so far."""
        return [program for program, _ in self._built.values()]
