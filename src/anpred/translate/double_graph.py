"""An ONNX graph rewritten to compute in float64, for float64 references (imports no DL library).

Every float tensor type (float32, float16, bfloat16) of the graph becomes double: graph
inputs and outputs, initializers, Constant values, ConstantOfShape fills (the default
float 0 included), Cast/EyeLike
targets and Attention's softmax precision, in subgraphs too. Inferred value types are
dropped (shape inference recomputes them). This is the graph the float64 reference
evaluates when the torch translation cannot (:mod:`anpred.translate.evaluator_reference`),
and the graph the torch translators' float64 results are checked against in tests.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: ONNX float element types that become double.
FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16})

#: Attributes naming a float element type to produce (op type -> attribute names).
_TYPE_ATTRIBUTES = {
    "Cast": ("to",),
    "EyeLike": ("dtype",),
    "Attention": ("softmax_precision",),
    "RandomNormal": ("dtype",),
    "RandomUniform": ("dtype",),
    "RandomNormalLike": ("dtype",),
    "RandomUniformLike": ("dtype",),
    "Bernoulli": ("dtype",),
}


def _double_tensor(tensor: TensorProto) -> TensorProto:
    if tensor.data_type not in FLOAT_TYPES:
        return tensor
    array = numpy_helper.to_array(tensor).astype(np.float64)
    return numpy_helper.from_array(array, tensor.name)


def _double_value_info(info: onnx.ValueInfoProto) -> None:
    kind = info.type
    while kind.HasField("sequence_type") or kind.HasField("optional_type"):
        kind = (
            kind.sequence_type.elem_type
            if kind.HasField("sequence_type")
            else kind.optional_type.elem_type
        )
    if kind.HasField("tensor_type") and kind.tensor_type.elem_type in FLOAT_TYPES:
        kind.tensor_type.elem_type = TensorProto.DOUBLE


def _double_node(node: onnx.NodeProto) -> None:
    if node.op_type == "Constant":
        for attr in node.attribute:
            if attr.name == "value_float":
                value = numpy_helper.from_array(np.asarray(attr.f, dtype=np.float64))
                node.attribute.remove(attr)
                node.attribute.append(helper.make_attribute("value", value))
                break
            if attr.name == "value_floats":
                value = numpy_helper.from_array(np.asarray(attr.floats, dtype=np.float64))
                node.attribute.remove(attr)
                node.attribute.append(helper.make_attribute("value", value))
                break
    if node.op_type == "ConstantOfShape" and not any(a.name == "value" for a in node.attribute):
        zero = numpy_helper.from_array(np.zeros(1, dtype=np.float64))  # the default: float 0
        node.attribute.append(helper.make_attribute("value", zero))
    typed = _TYPE_ATTRIBUTES.get(node.op_type, ())
    for attr in node.attribute:
        if attr.name in typed and attr.i in FLOAT_TYPES:
            attr.i = TensorProto.DOUBLE
        if attr.type == onnx.AttributeProto.TENSOR:
            attr.t.CopyFrom(_double_tensor(attr.t))
        elif attr.type == onnx.AttributeProto.GRAPH:
            _double_graph(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            for graph in attr.graphs:
                _double_graph(graph)


def _double_graph(graph: onnx.GraphProto) -> None:
    for info in (*graph.input, *graph.output):
        _double_value_info(info)
    del graph.value_info[:]
    doubled = [_double_tensor(init) for init in graph.initializer]
    del graph.initializer[:]
    graph.initializer.extend(doubled)
    for node in graph.node:
        _double_node(node)


def to_double(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return a copy of ``model`` whose float tensors and float computations are float64.

    Model-local functions are rewritten the same way (their nodes' types and constants).
    """
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    _double_graph(copy.graph)
    for function in copy.functions:
        for node in function.node:
            _double_node(node)
    return copy
