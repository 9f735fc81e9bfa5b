"""Stage isolation graphs: cut an anchored ONNX graph at every anchor.

In the isolation graph every consumer of an anchor tensor ``T`` reads a new graph input
``T.fed`` instead, while ``T`` itself is still computed and returned. Feeding the fp64
reference's anchors (rounded to float32) as the ``*.fed`` inputs therefore makes every
returned anchor depend only on its own stage's computation on exact inputs: all stages are
isolated in one inference, about the cost of one anchored inference.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx

#: Suffix of the graph inputs that replace anchor tensors downstream.
FED_SUFFIX = ".fed"


def fed_name(onnx_name: str) -> str:
    """Name of the graph input that replaces anchor tensor ``onnx_name`` downstream."""
    return onnx_name + FED_SUFFIX


def isolation_model(
    model: onnx.ModelProto, anchor_names: Sequence[str]
) -> tuple[onnx.ModelProto, list[str]]:
    """Return the isolation graph of ``model`` and the anchor names it takes as inputs.

    Args:
        model: The anchored ONNX model (anchors are graph outputs).
        anchor_names: ONNX names of the anchor tensors.

    Returns:
        The rewritten model and the anchor names that have downstream consumers (each
        one now has a graph input ``fed_name(name)``).
    """
    cut = onnx.ModelProto()
    cut.CopyFrom(model)
    graph = cut.graph
    anchors = set(anchor_names)
    consumed: list[str] = []
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name in anchors:
                node.input[index] = fed_name(name)
                if name not in consumed:
                    consumed.append(name)
    types = {vi.name: vi for vi in list(graph.output) + list(graph.value_info)}
    for name in consumed:
        source = types[name]
        fed = onnx.ValueInfoProto()
        fed.CopyFrom(source)
        fed.name = fed_name(name)
        graph.input.append(fed)
    return cut, consumed
