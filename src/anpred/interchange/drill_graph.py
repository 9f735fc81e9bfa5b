"""Drill-down graphs: the operators of some stages, cut out of an anchored ONNX graph.

A drill graph recomputes only the flagged stages of a run. Its single graph input is one
flat float32 vector, the stages' inputs packed end to end (the fp64 reference's anchor
values rounded to float32, and the model input where a stage reads it); ``Slice`` and
``Reshape`` nodes unpack it under the names the stages' nodes read
(:mod:`anpred.interchange.packing`). Every float output of
every operator of the stages is a graph output (an *operator anchor*, keyed ``op0001``,
``op0002``... in graph order, so that capture files need no ONNX names); the last
stage's anchor tensor is also the ``output`` anchor, through an ``Identity``.

Run through any runner, the drill graph gives every operator's output computed from the
exact stage input (the chain); its stage-isolation graph
(:func:`~anpred.interchange.isolation.isolation_model`, cut at every operator anchor)
gives every operator's output computed from the fp64 reference's values of its own
inputs: the error each operator introduces by itself.

The nodes keep their names, so the fault plans of a run (node keys, see
:mod:`anpred.inject.stages`) apply to the drill graph unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper

from anpred.errors import UsageError
from anpred.interchange.export import AnchorOutput
from anpred.interchange.isolation import fed_name, isolation_model
from anpred.interchange.packing import PackedTensor, default_opset, is_unpack_node, unpack_nodes
from anpred.zoo.spec import OUTPUT_ANCHOR

#: Name of the drill graph's packed input.
PACKED_INPUT = "drill.input"
#: Name of the drill graph's final output (the last stage's anchor, through Identity).
DRILL_OUTPUT = "drill.output"
#: Ops whose outputs are not operator anchors (folded before any library runs them).
_SKIPPED = frozenset({"Constant"})
#: Attribute of anpred's export wrapper that holds the model (first scope of node names).
_WRAPPER = "model"


def module_path(node_name: str) -> str | None:
    """The torch module path in a TorchScript-exported node name, if any.

    anpred's exports wrap the model in a module whose attribute ``model`` holds it, and
    the exporter repeats a parent's path in its children's scope names:
    ``/model/model.2/cv1/conv/Conv`` → ``model.2.cv1.conv`` (YOLO),
    ``/model/layer1/layer1.0/conv1/Conv`` → ``layer1.0.conv1`` (ResNet),
    ``/model/features/features.4/block/block.0/block.0.0/Conv`` → ``features.4.block.0.0``
    (MobileNetV3); a name without
    scopes → ``None``.
    """
    if not node_name.startswith("/"):
        return None
    parts = [p for p in node_name.split("/")[1:-1] if p]
    if parts and parts[0] == _WRAPPER:
        parts = parts[1:]
    if not parts:
        return None
    path = [parts[0]]
    for previous, part in zip(parts, parts[1:], strict=False):
        # a child's scope repeats its parent's: block / block.0 / block.0.0
        path.append(part[len(previous) + 1 :] if part.startswith(previous + ".") else part)
    return ".".join(path)


@dataclass(frozen=True)
class OpAnchor:
    """One operator output exposed by a drill graph.

    Attributes:
        key: Anchor key in captures (``op0007``).
        node: Node key (name, or first output when unnamed).
        op_type: ONNX op type.
        output: The ONNX tensor name.
        stage: Anchor key of the stage the node belongs to.
        module: Torch module path, when the node name carries it.
        shape: Static shape.
    """

    key: str
    node: str
    op_type: str
    output: str
    stage: str
    module: str | None
    shape: tuple[int, ...]


@dataclass(frozen=True)
class StageInput:
    """One packed tensor: where it sits in the packed vector and what it stands for.

    Attributes:
        name: The tensor name the stage's nodes read.
        anchor: Anchor key whose fp64 value it carries; ``None``: the model input.
        shape: Its shape.
        offset: First element in the packed vector.
    """

    name: str
    anchor: str | None
    shape: tuple[int, ...]
    offset: int

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass
class DrillGraph:
    """A drill graph and what its inputs and outputs mean."""

    anchored: onnx.ModelProto
    plain: onnx.ModelProto
    inputs: list[StageInput]
    ops: list[OpAnchor]
    stages: dict[str, list[str]] = field(default_factory=dict)
    output_shape: tuple[int, ...] = ()

    @property
    def packed_size(self) -> int:
        """Elements of the packed input."""
        return sum(i.size for i in self.inputs)

    def anchors(self) -> list[AnchorOutput]:
        """The operator anchors, then ``output``, as an export lists them."""
        found = [
            AnchorOutput(o.key, o.key, o.module or "", o.stage, o.output, o.shape) for o in self.ops
        ]
        stage = list(self.stages)[-1]
        return [
            *found,
            AnchorOutput(OUTPUT_ANCHOR, OUTPUT_ANCHOR, "", stage, DRILL_OUTPUT, self.output_shape),
        ]

    def pack(self, values: dict[str | None, np.ndarray]) -> np.ndarray:
        """The packed float32 input from ``{anchor key or None (model input): array}``."""
        parts = []
        for item in self.inputs:
            value = np.asarray(values[item.anchor])
            if value.shape != item.shape:
                raise UsageError(
                    f"drill input {item.anchor or 'model input'} has shape {value.shape}, "
                    f"expected {item.shape}"
                )
            parts.append(value.astype(np.float32).reshape(-1))
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def _types(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    return {vi.name: vi for vi in [*graph.input, *graph.value_info, *graph.output]}


def _is_float(vi: onnx.ValueInfoProto | None) -> bool:
    return bool(
        vi is not None
        and vi.type.HasField("tensor_type")
        and vi.type.tensor_type.elem_type == TensorProto.FLOAT
    )


def _static_shape(vi: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    dims = vi.type.tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return tuple(int(d.dim_value) for d in dims)


def _node_key(node: onnx.NodeProto) -> str:
    return node.name or node.output[0]


def build_drill_graph(
    anchored: onnx.ModelProto,
    anchors: Sequence[AnchorOutput],
    input_name: str,
    input_shape: Sequence[int],
    stages: Sequence[str],
) -> DrillGraph:
    """Cut the operators of ``stages`` out of the anchored graph (see the module doc).

    Args:
        anchored: The run's anchored ONNX model.
        anchors: The export's anchors, in order.
        input_name: The model input's name.
        input_shape: The model input's shape.
        stages: Anchor keys of the stages to drill into (any order).

    Raises:
        UsageError: Unknown stage, a stage reading a non-float or dynamically shaped
            tensor, or a stage without operators.
    """
    by_key = {a.key: a for a in anchors}
    unknown = [s for s in stages if s not in by_key]
    if unknown:
        raise UsageError(f"unknown stage(s) {', '.join(unknown)}; anchors: {', '.join(by_key)}")
    ordered = [a.key for a in anchors if a.key in set(stages)]
    cut, _ = isolation_model(anchored, [a.onnx_name for a in anchors])
    types = _types(anchored)
    fed_anchor = {fed_name(a.onnx_name): a for a in anchors}
    initializers = {i.name: i for i in cut.graph.initializer}
    producer = {o: n for n in cut.graph.node for o in n.output if o}
    members: dict[str, str] = {}  # node key -> stage (earliest drilled stage reaching it)
    boundary: dict[str, str | None] = {}  # packed tensor name -> anchor key / None
    for stage in ordered:
        stack, seen = [by_key[stage].onnx_name], set()
        while stack:
            name = stack.pop()
            if name in seen or not name:
                continue
            seen.add(name)
            node = producer.get(name)
            if node is None:
                if name in initializers:
                    continue
                if name in fed_anchor:
                    boundary.setdefault(name, fed_anchor[name].key)
                elif name == input_name:
                    boundary.setdefault(name, None)
                else:
                    raise UsageError(f"stage {stage} reads {name!r}, which no node produces")
                continue
            members.setdefault(_node_key(node), stage)
            stack.extend(node.input)
    nodes = [n for n in cut.graph.node if _node_key(n) in members]
    inputs: list[StageInput] = []
    offset = 0
    for name, anchor in boundary.items():
        source = types.get(anchor and by_key[anchor].onnx_name or name)
        shape = tuple(by_key[anchor].shape) if anchor else tuple(input_shape)
        if not _is_float(source):
            raise UsageError(
                f"cannot drill into a stage that reads the non-float tensor "
                f"{anchor or 'model input'}"
            )
        inputs.append(StageInput(name, anchor, shape, offset))
        offset += inputs[-1].size
    # Outputs that depend on the stage inputs: a constant subgraph's outputs measure
    # nothing, and converters drop them (onnx2tf) or refuse them (ExecuTorch's XNNPACK).
    varying = set(boundary)
    for node in nodes:
        if any(name in varying for name in node.input):
            varying.update(o for o in node.output if o)
    ops: list[OpAnchor] = []
    stage_ops: dict[str, list[str]] = {s: [] for s in ordered}
    for node in nodes:
        if node.op_type in _SKIPPED or is_unpack_node(node):
            continue  # the unpacking of a user model's several inputs measures nothing
        for out in node.output:
            vi = types.get(out)
            if not out or out not in varying or not _is_float(vi):
                continue
            assert vi is not None
            shape = _static_shape(vi)
            if shape is None:
                continue
            stage = members[_node_key(node)]
            key = f"op{len(ops) + 1:04d}"
            ops.append(
                OpAnchor(
                    key, _node_key(node), node.op_type, out, stage, module_path(node.name), shape
                )
            )
            stage_ops[stage].append(key)
    empty = [s for s, keys in stage_ops.items() if not keys]
    if empty:
        raise UsageError(f"stage(s) {', '.join(empty)} have no float operator to drill into")
    last = by_key[ordered[-1]].onnx_name
    packing = [PackedTensor(i.name, i.shape, i.offset) for i in inputs]
    unpack, consts = unpack_nodes(PACKED_INPUT, packing, default_opset(anchored), "drill/in")
    body = [
        *unpack,
        *nodes,
        helper.make_node("Identity", [last], [DRILL_OUTPUT], name="drill/output"),
    ]
    used = {i for n in nodes for i in n.input}
    inits = [initializers[n] for n in initializers if n in used] + consts
    packed = helper.make_tensor_value_info(PACKED_INPUT, TensorProto.FLOAT, [offset])
    outputs = [
        helper.make_tensor_value_info(o.output, TensorProto.FLOAT, list(o.shape)) for o in ops
    ]
    # ``output`` repeats the last drilled stage's anchor tensor
    final = helper.make_tensor_value_info(
        DRILL_OUTPUT, TensorProto.FLOAT, list(by_key[ordered[-1]].shape)
    )
    seen_out: set[str] = set()
    unique = [o for o in outputs if not (o.name in seen_out or seen_out.add(o.name))]

    def model(graph_outputs: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
        graph = helper.make_graph(body, "anpred-drill", [packed], graph_outputs, inits)
        made = helper.make_model(graph, opset_imports=list(anchored.opset_import))
        made.ir_version = anchored.ir_version
        return made

    return DrillGraph(
        model([*unique, final]),
        model([final]),
        inputs,
        ops,
        stage_ops,
        tuple(by_key[ordered[-1]].shape),
    )
