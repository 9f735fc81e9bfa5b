"""Subgraphs of control-flow nodes (If, Loop, Scan), prepared as models of their own.

A subgraph may read values of the enclosing graph by name (its *outer* names). Each
subgraph becomes a model whose graph inputs are its own inputs followed by the outer
names that are computed at run time; the outer values that are static (initializers,
folded constants) become its initializers, so they stay static inside. The interpreter
(:class:`~anpred.translate.graph.GraphProgram`) builds one program per subgraph and
passes the run-time outer values to the control-flow translator after the node's inputs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper


@dataclass(frozen=True)
class Subgraph:
    """One subgraph attribute of a node, ready to run.

    Attributes:
        program: The subgraph's program (a :class:`~anpred.translate.graph.GraphProgram`);
            ``program.execute(*inputs, *outer values)`` runs it on library values.
        outer: The run-time outer names the program takes after the subgraph's inputs.
    """

    program: Any
    outer: tuple[str, ...]

    def run(self, inputs: Sequence[Any], outer: Mapping[str, Any]) -> list[Any]:
        """Run on the subgraph's inputs and the enclosing graph's values by name."""
        return list(self.program.execute(*inputs, *(outer[name] for name in self.outer)))


def graph_attributes(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    """The (attribute name, graph) pairs of ``node`` (``GRAPHS`` lists are not supported)."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.name, attr.g


def outer_names(graph: onnx.GraphProto) -> list[str]:
    """Names ``graph`` (and the subgraphs inside it) reads from enclosing scopes, in order."""
    defined = {vi.name for vi in graph.input} | {init.name for init in graph.initializer}
    defined.add("")
    found: list[str] = []
    for node in graph.node:
        reads = list(node.input)
        for _, inner in graph_attributes(node):
            reads += outer_names(inner)
        found += [name for name in reads if name not in defined and name not in found]
        defined.update(node.output)
    return found


def subgraph_model(
    graph: onnx.GraphProto,
    outer: Sequence[str],
    static: Mapping[str, np.ndarray],
    infos: Mapping[str, onnx.ValueInfoProto],
    parent: onnx.ModelProto,
) -> onnx.ModelProto:
    """The model of ``graph``: run-time ``outer`` names as extra inputs, static ones inlined.

    Args:
        graph: The subgraph.
        outer: Its outer names (:func:`outer_names`).
        static: Values of the enclosing graph known at build time.
        infos: Inferred value infos of the enclosing graph (types of the outer names).
        parent: The enclosing model (opsets, IR version, local functions).
    """
    body = onnx.GraphProto()
    body.CopyFrom(graph)
    for name in outer:
        if name in static:
            body.initializer.append(numpy_helper.from_array(np.asarray(static[name]), name))
        elif name in infos:
            body.input.append(infos[name])
        else:
            body.input.append(helper.make_empty_tensor_value_info(name))
    model = helper.make_model(body, opset_imports=list(parent.opset_import))
    model.ir_version = parent.ir_version
    model.functions.extend(parent.functions)
    return model
