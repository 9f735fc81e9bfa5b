"""Automatic stage anchors for graphs whose node names carry no module scopes.

paddle2onnx, tf2onnx and hand-built graphs name nodes ``Conv_0`` or not at all, so there is
no ``/model.2/...`` scope to cut at. The stages then come from the dataflow graph alone:

1. **Data tensors**: the graph input and every tensor computed from it (constant
   subgraphs, e.g. folded shape arithmetic, are left out). With several inputs (an image
   and a scale, token ids and a mask), every input in turn is the data input and the others
   count as constants; the input with the most cut points (the first of equals) is used.
   Any tensor is a valid stage boundary (a later stage may also read the model inputs
   directly: they carry no error); cut points on one input's paths make the stages follow
   the main computation instead of stopping at the first merge of two inputs.
2. **Cut points**: the data tensors that every input-to-output path passes through. Walking
   the nodes in their (topological) order, a tensor is a cut point exactly when, right after
   its producer runs, it is the only data tensor still needed later (consumed by a later
   node, a subgraph, or a graph output): any other live tensor would be a path around it.
   Graph outputs themselves are not anchors (the final output always is one).
3. **Cost**: each node costs its multiply-adds where they dominate (Conv, ConvTranspose:
   output elements x input channels per group x kernel size; MatMul/Gemm: output elements x
   the reduced dimension) and its output element count otherwise (static shapes; 1 when a
   shape is unknown).
4. **K stages of about equal cost**: K-1 times, the costliest stage that still holds a cut
   point is split at its cut point nearest to the stage's cost midpoint (cumulative cost in
   node order), so there are at most K-1 anchors plus the final output. ``--stages K``
   sets K; default 8 at ``--granularity stage`` and 32 at ``layer``.
5. **Names** give position and op: ``stage3.HardSigmoid`` is the 3rd anchor, produced by a
   ``HardSigmoid`` node.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

import onnx

#: Default K by anchor granularity.
DEFAULT_STAGES = {"stage": 8, "layer": 32}
_MACS_OPS = {"Conv", "ConvTranspose", "MatMul", "Gemm", "ConvInteger", "MatMulInteger"}


def has_scopes(model: onnx.ModelProto) -> bool:
    """Whether some node name carries a module scope (``/model.2/conv/Conv``)."""
    return any((n.name or "").startswith("/") and n.name.count("/") >= 2 for n in model.graph.node)


def _subgraph_inputs(node: onnx.NodeProto) -> set[str]:
    """Names a node's subgraphs (If, Loop, Scan bodies) read from the enclosing graph."""
    names: set[str] = set()
    for attr in node.attribute:
        graphs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
        for graph in graphs:
            for inner in graph.node:
                names.update(i for i in inner.input if i)
                names |= _subgraph_inputs(inner)
    return names


def _dims(shapes: Mapping[str, tuple[int, ...]], name: str) -> tuple[int, ...] | None:
    return shapes.get(name)


def node_cost(node: onnx.NodeProto, shapes: Mapping[str, tuple[int, ...]]) -> float:
    """Approximate work of one node (see the module docstring, step 3)."""
    out = _dims(shapes, node.output[0]) if node.output else None
    if out is None:
        return 1.0
    elements = float(math.prod(out)) if out else 1.0
    if node.op_type in _MACS_OPS and len(node.input) > 1:
        weight = _dims(shapes, node.input[1])
        if weight:
            if node.op_type.startswith("Conv"):
                group = next((a.i for a in node.attribute if a.name == "group"), 1) or 1
                per_out = math.prod(weight[1:]) if node.op_type != "ConvTranspose" else (
                    weight[0] // group * math.prod(weight[2:])
                )
                return elements * max(1, per_out)
            return elements * max(1, weight[0] if node.op_type == "Gemm" else weight[-2]
                                   if len(weight) > 1 else 1)
    return max(1.0, elements)


def static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Static shapes of the model's tensors that shape inference (or value_info) knows."""
    shapes: dict[str, tuple[int, ...]] = {}
    graph = model.graph
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        dims = vi.type.tensor_type.shape.dim
        if vi.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = tuple(int(d.dim_value) for d in dims)
    for init in graph.initializer:
        shapes[init.name] = tuple(init.dims)
    return shapes


def _real_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def cut_points(
    model: onnx.ModelProto, data_inputs: Collection[str] | None = None
) -> list[tuple[int, str]]:
    """``(node index, tensor)`` of every cut point, in node order (steps 1-2).

    Args:
        model: The graph.
        data_inputs: The inputs whose paths count (default: every input); the others
            are treated like constants.
    """
    graph = model.graph
    if data_inputs is None:
        data = {i.name for i in _real_inputs(model)}
    else:
        data = set(data_inputs)
    last_use: dict[str, int] = {}
    for index, node in enumerate(graph.node):
        for name in [*node.input, *_subgraph_inputs(node)]:
            if name:
                last_use[name] = index
    finals = {o.name for o in graph.output}
    end = len(graph.node)
    for name in finals:
        last_use[name] = end
    live = {name for name in data if name in last_use}
    cuts = []
    for index, node in enumerate(graph.node):
        reads = set(node.input) | _subgraph_inputs(node)
        if not reads & data:
            continue  # constant subgraph
        produced = [o for o in node.output if o]
        data.update(produced)
        live.update(o for o in produced if last_use.get(o, -1) > index)
        live = {name for name in live if last_use.get(name, -1) > index}
        if len(live) == 1:
            (tensor,) = live
            if tensor in produced and tensor not in finals:
                cuts.append((index, tensor))
    return cuts


def auto_anchors(model: onnx.ModelProto, stages: int) -> list[tuple[str, str]]:
    """``(key, tensor)`` of the automatic anchors: K stages of about equal cost (step 4).

    Args:
        model: The graph, with static shapes where known (for the cost).
        stages: K, the number of stages (at most K-1 anchors are chosen).
    """
    inputs = _real_inputs(model)
    if len(inputs) > 1:  # step 1 with several inputs: the input with the most cut points
        cuts = max(
            (cut_points(model, [i.name]) for i in inputs),
            key=len,  # max() keeps the first of equals: the graph's first input
        )
    else:
        cuts = cut_points(model)
    if not cuts or stages < 2:
        return []
    shapes = static_shapes(model)
    cumulative, total = [], 0.0
    for node in model.graph.node:
        total += node_cost(node, shapes)
        cumulative.append(total)
    chosen: list[tuple[int, str]] = []
    for _ in range(stages - 1):
        inner = [(c[0], cumulative[c[0]]) for c in chosen]
        bounds = [(-1, 0.0), *inner, (len(cumulative), total)]
        splits = []
        for (lo, lo_cost), (hi, hi_cost) in zip(bounds, bounds[1:], strict=False):
            inside = [c for c in cuts if lo < c[0] < hi]
            if inside:
                middle = (lo_cost + hi_cost) / 2
                best = min(inside, key=lambda c: abs(cumulative[c[0]] - middle))
                splits.append((hi_cost - lo_cost, best))
        if not splits:
            break
        chosen = sorted([*chosen, max(splits)[1]])
    ops = {o: n.op_type for n in model.graph.node for o in n.output}
    return [(f"stage{i}.{ops[t]}", t) for i, (_, t) in enumerate(chosen, start=1)]
