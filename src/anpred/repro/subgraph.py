"""Reduced cases: a few operators of a drilled stage, fed with the fp64 reference's values.

A *case* is a set of nodes of a drill graph (:mod:`anpred.interchange.drill_graph`). Every
tensor the case reads and does not compute is a graph input carrying the fp64 reference's
value of that tensor (rounded to float32, as the drill-down feeds stage inputs): so no
error is carried in, and the case's error is the error its own operators introduce. A
tensor the reference did not capture (an integer shape, a tensor without a static shape)
cannot be fed: its producer joins the case (:meth:`StageCases.closure`).

Several cases are tried at once in one *batch* graph (:func:`batch_graph`): each case is a
copy of its nodes with its tensors and node names prefixed (``c2/``), so that one worker
job per participant judges a whole round of a search. The batch graph has one packed
float32 input, like a drill graph, so it runs through every participant's runner
unchanged. The reproducer's own ``model.onnx`` is the case alone with named inputs
(:func:`standalone_model`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

from anpred.errors import UsageError
from anpred.interchange.drill_graph import DrillGraph, OpAnchor
from anpred.interchange.export import AnchorOutput
from anpred.interchange.packing import PackedTensor, default_opset, is_unpack_node, unpack_nodes
from anpred.zoo.spec import OUTPUT_ANCHOR

#: Name of a batch graph's packed input.
BATCH_INPUT = "repro.input"
#: Name of a batch graph's final output (the first case's target operator output).
BATCH_OUTPUT = "repro.output"


def node_key(node: onnx.NodeProto) -> str:
    """A node's key: its name, or its first output (as fault plans and drill records)."""
    return node.name or node.output[0]


@dataclass(frozen=True)
class FedTensor:
    """One input of a case: a tensor it reads, fed with the fp64 reference's value.

    Attributes:
        name: The tensor's name in the drill graph.
        shape: Its static shape.
        op: The operator anchor that captured its fp64 value; ``None``: a stage input,
            read from the drill-down's packed inputs.
        offset: For a stage input, its first element in the drill-down's packed vector.
    """

    name: str
    shape: tuple[int, ...]
    op: str | None
    offset: int = 0

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True)
class Case:
    """A reduced case: some nodes of a stage and what they are fed.

    Attributes:
        nodes: Node keys, graph order.
        fed: The tensors fed from the fp64 reference, in the order they are read.
        ops: The operator anchors computed by the case (drill-graph keys), graph order.
        target: The operator anchor whose symptom the case must show.
    """

    nodes: tuple[str, ...]
    fed: tuple[FedTensor, ...]
    ops: tuple[str, ...]
    target: str

    @property
    def size(self) -> int:
        """Operators in the case (nodes that compute an operator anchor)."""
        return len(self.ops)


class StageCases:
    """The cases that can be cut out of one drill graph's stage.

    Args:
        graph: The drill graph (as the run's drill-down built it).
        stage: The drilled stage.
    """

    def __init__(self, graph: DrillGraph, stage: str) -> None:
        self.graph = graph
        self.stage = stage
        body = [
            n
            for n in graph.anchored.graph.node
            if not is_unpack_node(n) and n.output[0] != "drill.output" and n.name != "drill/output"
        ]
        self.nodes = {node_key(n): n for n in body}
        self.order = {k: i for i, k in enumerate(self.nodes)}
        self.producer = {o: node_key(n) for n in body for o in n.output if o}
        self.initializers = {i.name for i in graph.anchored.graph.initializer}
        self.op_of_output = {o.output: o for o in graph.ops}
        self.ops_of_node: dict[str, list[OpAnchor]] = {}
        for o in graph.ops:
            self.ops_of_node.setdefault(o.node, []).append(o)
        self.stage_inputs = {i.name: i for i in graph.inputs}
        #: The stage's operator nodes, graph order: the domain of the search.
        self.domain = [o.node for o in graph.ops if o.stage == stage]
        self.domain = list(dict.fromkeys(self.domain))
        if not self.domain:
            raise UsageError(f"stage {stage} has no operator in the drill graph")

    def op(self, key: str) -> OpAnchor:
        """The operator anchor ``key``."""
        found = next((o for o in self.graph.ops if o.key == key), None)
        if found is None:
            raise UsageError(f"the drill graph has no operator {key}")
        return found

    def closure(self, nodes: Sequence[str]) -> list[str]:
        """``nodes`` and the producers of every tensor they read that cannot be fed
        (not captured by the fp64 reference as a float operator anchor or stage input).
        """
        chosen = set(nodes)
        stack = list(nodes)
        while stack:
            node = self.nodes[stack.pop()]
            for name in node.input:
                if not name or name in self.initializers or name in self.stage_inputs:
                    continue
                producer = self.producer.get(name)
                if producer is None or producer in chosen:
                    continue
                if name in self.op_of_output:
                    continue  # fed from the reference's capture
                chosen.add(producer)
                stack.append(producer)
        return sorted(chosen, key=self.order.__getitem__)

    def case(self, nodes: Sequence[str], target: str) -> Case:
        """The case of ``nodes`` (closed, see :meth:`closure`) showing ``target``'s symptom.

        Raises:
            UsageError: The target operator's node is not among ``nodes``.
        """
        target_node = self.op(target).node
        if target_node not in nodes:
            raise UsageError(f"a case for {target} must hold its node {target_node}")
        keys = self._ancestors(self.closure(nodes), target_node)
        produced = {o for k in keys for o in self.nodes[k].output if o}
        fed: dict[str, FedTensor] = {}
        for k in keys:
            for name in self.nodes[k].input:
                if not name or name in produced or name in self.initializers or name in fed:
                    continue
                if name in self.stage_inputs:
                    si = self.stage_inputs[name]
                    fed[name] = FedTensor(name, tuple(si.shape), None, si.offset)
                else:
                    op = self.op_of_output[name]
                    fed[name] = FedTensor(name, tuple(op.shape), op.key)
        ops = tuple(o.key for k in keys for o in self.ops_of_node.get(k, ()))
        return Case(tuple(keys), tuple(fed.values()), ops, target)

    def _ancestors(self, keys: Sequence[str], target_node: str) -> list[str]:
        """The nodes of ``keys`` the target node depends on through ``keys`` (the target
        included): an operator whose output the target does not read cannot change it.
        """
        chosen = set(keys)
        kept, stack = {target_node}, [target_node]
        while stack:
            for name in self.nodes[stack.pop()].input:
                producer = self.producer.get(name)
                if producer in chosen and producer not in kept:
                    kept.add(producer)
                    stack.append(producer)
        return sorted(kept, key=self.order.__getitem__)

    def fed_values(
        self, case: Case, packed: np.ndarray, fp64: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """The case's inputs for one input of the run, float32.

        Args:
            case: The case.
            packed: The drill-down's packed stage inputs of that input.
            fp64: The fp64 reference's operator anchors of that input (drill-graph keys).
        """
        values = {}
        for f in case.fed:
            if f.op is None:
                value = packed[f.offset : f.offset + f.size].reshape(f.shape)
            else:
                value = np.asarray(fp64[f.op]).reshape(f.shape)
            values[f.name] = value.astype(np.float32)
        return values


@dataclass
class Batch:
    """Several cases in one graph with one packed input.

    Attributes:
        anchored: Every case's target operator output, and ``output``.
        plain: Only ``output`` (the first case's target).
        anchors: The anchors in export order (keys ``c<i>/<target key>``, then ``output``).
        packing: Where each case's fed tensors sit in the packed input.
        cases: The cases, in prefix order.
    """

    anchored: onnx.ModelProto
    plain: onnx.ModelProto
    anchors: list[AnchorOutput]
    packing: list[tuple[int, FedTensor, PackedTensor]]
    cases: list[Case]

    @property
    def packed_size(self) -> int:
        """Elements of the packed input."""
        return sum(p.size for _, p, _ in self.packing)

    def node_names(self, index: int, nodes: Sequence[str]) -> list[str]:
        """The names of ``nodes`` (drill-graph keys) in case ``index``'s copy."""
        mine = set(self.cases[index].nodes)
        return [prefix(index) + n for n in nodes if n in mine]

    def pack(self, values: Sequence[Mapping[str, np.ndarray]]) -> np.ndarray:
        """The packed input from each case's fed values (:meth:`StageCases.fed_values`)."""
        parts = [np.asarray(values[i][f.name], np.float32).reshape(-1) for i, f, _ in self.packing]
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def prefix(index: int) -> str:
    """The prefix of case ``index``'s tensors, node names and anchor keys."""
    return f"c{index}/"


def _copy(node: onnx.NodeProto, p: str, keep: set[str]) -> onnx.NodeProto:
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.name = p + node_key(node)
    for i, name in enumerate(node.input):
        if name and name not in keep:
            copy.input[i] = p + name
    for i, name in enumerate(node.output):
        if name:
            copy.output[i] = p + name
    return copy


def batch_graph(cases: Sequence[Case], stage: StageCases) -> Batch:
    """One graph running every case side by side (see the module doc)."""
    anchored_model = stage.graph.anchored
    keep = stage.initializers
    body: list[onnx.NodeProto] = []
    anchors: list[AnchorOutput] = []
    outputs: list[onnx.ValueInfoProto] = []
    packing: list[tuple[int, FedTensor, PackedTensor]] = []
    offset = 0
    for i, case in enumerate(cases):
        p = prefix(i)
        for k in case.nodes:
            body.append(_copy(stage.nodes[k], p, keep))
        for f in case.fed:
            packing.append((i, f, PackedTensor(p + f.name, f.shape, offset)))
            offset += f.size
        # only the target is exposed: an exposed intermediate tensor would keep a runtime
        # from fusing across it, and a fusion may be what the symptom needs
        op = stage.op(case.target)
        anchors.append(
            AnchorOutput(p + op.key, p + op.key, op.module or "", op.stage, p + op.output, op.shape)
        )
        outputs.append(
            helper.make_tensor_value_info(p + op.output, TensorProto.FLOAT, list(op.shape))
        )
    opset = default_opset(anchored_model)
    unpack, consts = unpack_nodes(BATCH_INPUT, [t for _, _, t in packing], opset, "repro/in")
    first = stage.op(cases[0].target)
    final = helper.make_tensor_value_info(BATCH_OUTPUT, TensorProto.FLOAT, list(first.shape))
    body = [
        *unpack,
        *body,
        helper.make_node("Identity", [prefix(0) + first.output], [BATCH_OUTPUT], name="repro/out"),
    ]
    used = {i for n in body for i in n.input}
    inits = [i for i in anchored_model.graph.initializer if i.name in used] + consts
    packed = helper.make_tensor_value_info(BATCH_INPUT, TensorProto.FLOAT, [offset])
    seen: set[str] = set()
    unique = [o for o in outputs if not (o.name in seen or seen.add(o.name))]

    def model(graph_outputs: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
        graph = helper.make_graph(body, "anpred-repro-batch", [packed], graph_outputs, inits)
        made = helper.make_model(graph, opset_imports=list(anchored_model.opset_import))
        made.ir_version = anchored_model.ir_version
        return made

    anchors.append(AnchorOutput(OUTPUT_ANCHOR, OUTPUT_ANCHOR, "", first.stage, BATCH_OUTPUT,
                                first.shape))  # fmt: skip
    return Batch(model([*unique, final]), model([final]), anchors, packing, list(cases))


def input_names(case: Case) -> dict[str, str]:
    """Drill-graph tensor name → the reproducer's input name (``x0``, ``x1``...)."""
    return {f.name: f"x{i}" for i, f in enumerate(case.fed)}


#: Name of the reproducer model's output.
STANDALONE_OUTPUT = "y"


def standalone_model(case: Case, stage: StageCases) -> onnx.ModelProto:
    """The case alone, as the reproducer's ``model.onnx``: inputs ``x0``, ``x1``... (the fed
    tensors, in :attr:`Case.fed` order), output ``y`` (the target operator's output).
    """
    anchored_model = stage.graph.anchored
    names = input_names(case)
    target = stage.op(case.target)
    nodes = []
    for k in case.nodes:
        node = onnx.NodeProto()
        node.CopyFrom(stage.nodes[k])
        for i, name in enumerate(node.input):
            if name in names:
                node.input[i] = names[name]
        for i, name in enumerate(node.output):
            if name == target.output:
                node.output[i] = STANDALONE_OUTPUT
        nodes.append(node)
    # readers of the target's output inside the case read it under its new name
    for node in nodes:
        for i, name in enumerate(node.input):
            if name == target.output:
                node.input[i] = STANDALONE_OUTPUT
    # keep only what the output depends on (a case's later operators do not change y)
    needed, kept = {STANDALONE_OUTPUT}, []
    for node in reversed(nodes):
        if any(o in needed for o in node.output):
            kept.append(node)
            needed.update(i for i in node.input if i)
    kept.reverse()
    used = {i for n in kept for i in n.input}
    inputs = [
        helper.make_tensor_value_info(names[f.name], TensorProto.FLOAT, list(f.shape))
        for f in case.fed
        if names[f.name] in used
    ]
    inits = [i for i in anchored_model.graph.initializer if i.name in used]
    output = helper.make_tensor_value_info(STANDALONE_OUTPUT, TensorProto.FLOAT, list(target.shape))
    graph = helper.make_graph(kept, "anpred-repro", inputs, [output], inits)
    made = helper.make_model(graph, opset_imports=list(anchored_model.opset_import))
    # IR 4 lets initializers stand apart from graph inputs (IR 3 models list them as inputs)
    made.ir_version = max(anchored_model.ir_version, 4)
    onnx.checker.check_model(made)
    return made
