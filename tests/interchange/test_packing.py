"""Several tensors through one float32 graph input (:mod:`anpred.interchange.packing`)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from anpred.errors import UsageError
from anpred.interchange.auto_anchors import auto_anchors
from anpred.interchange.packing import (
    PACKED_MODEL_INPUT,
    PackedTensor,
    is_unpack_node,
    layout,
    pack,
    pack_graph_inputs,
)


def _typed_model(opset: int) -> onnx.ModelProto:
    """Returns its three inputs as they arrive: int64 ids, bool flags, float16 values."""
    inputs = [
        helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3]),
        helper.make_tensor_value_info("flags", TensorProto.BOOL, [4]),
        helper.make_tensor_value_info("half", TensorProto.FLOAT16, [1, 2, 2]),
    ]
    nodes = [helper.make_node("Identity", [i.name], [f"{i.name}.out"]) for i in inputs]
    outputs = [
        helper.make_tensor_value_info(f"{i.name}.out", i.type.tensor_type.elem_type,
                                      [d.dim_value for d in i.type.tensor_type.shape.dim])
        for i in inputs
    ]
    graph = helper.make_graph(nodes, "typed", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


@pytest.mark.parametrize("opset", [9, 13])
def test_unpacking_restores_every_value_and_dtype(opset: int) -> None:
    model = _typed_model(opset)
    inputs = list(model.graph.input)
    packing = pack_graph_inputs(model, inputs, "typed.onnx")
    onnx.checker.check_model(model)
    assert [i.name for i in model.graph.input] == [PACKED_MODEL_INPUT]
    assert [(t.name, t.dtype, t.offset) for t in packing] == [
        ("ids", "int64", 0), ("flags", "bool", 6), ("half", "float16", 10)
    ]
    assert all(is_unpack_node(n) for n in model.graph.node[:-3])
    values = {
        "ids": np.array([[0, 7, -3], [2**24, -(2**24), 123456]], np.int64),
        "flags": np.array([True, False, False, True]),
        "half": np.array([[[0.1, -2.5], [65504, 1e-4]]], np.float16),
    }
    packed = pack(packing, values, ["ids", "flags", "half"])
    assert packed.dtype == np.float32 and packed.shape == (14,)
    got = ReferenceEvaluator(model).run(None, {PACKED_MODEL_INPUT: packed})
    for (name, value), out in zip(values.items(), got, strict=True):
        assert out.dtype == value.dtype and np.array_equal(out, value), name


def test_values_float32_cannot_hold_are_refused() -> None:
    packing = layout([("ids", (3,), "int64"), ("x", (1,), "float32")])
    assert packing[1] == PackedTensor("x", (1,), 3, "float32")
    x = np.ones(1, np.float32)
    for bad in (2**24 + 1, -(2**24) - 1, 2**40 + 1):
        with pytest.raises(UsageError, match="float32 cannot represent exactly"):
            pack(packing, {"ids": np.array([0, bad, 1]), "x": x}, ["ids", "x"])
    with pytest.raises(UsageError, match="has shape"):
        pack(packing, {"ids": np.zeros(4, np.int64), "x": x}, ["ids", "x"])


def test_automatic_anchors_follow_the_input_with_the_most_cut_points() -> None:
    """A scale that joins only at the end would leave no cut point on the image's paths
    if both inputs counted; with the scale as a constant, the chain is cut."""
    rng = np.random.default_rng(0)
    w = onnx.numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["a"]),
        helper.make_node("Tanh", ["a"], ["b"]),
        helper.make_node("MatMul", ["b", "w"], ["c"]),
        helper.make_node("Relu", ["c"], ["d"]),
        helper.make_node("Mul", ["d", "scale"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "late", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
                        helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w],
    )
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph))
    assert [t for _, t in auto_anchors(model, 8)] == ["a", "b", "c", "d"]


def test_ir3_models_list_the_unpacking_constants_as_inputs() -> None:
    """IR < 4 requires every initializer to be a graph input (the onnx package's own model
    files are IR 3); onnxruntime then runs the packed graph."""
    import onnxruntime as ort

    model = _typed_model(9)
    model.ir_version = 3
    pack_graph_inputs(model, list(model.graph.input), "ir3.onnx")
    onnx.checker.check_model(model)
    listed = {i.name for i in model.graph.input}
    assert {c.name for c in model.graph.initializer} <= listed
    packing = layout([("ids", (2, 3), "int64"), ("flags", (4,), "bool"),
                      ("half", (1, 2, 2), "float16")])
    values = {"ids": np.arange(6).reshape(2, 3), "flags": np.array([1, 0, 1, 0], bool),
              "half": np.ones((1, 2, 2), np.float16)}
    feed = pack(packing, values, list(values))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {PACKED_MODEL_INPUT: feed})
    assert all(np.array_equal(g, v) for g, v in zip(got, values.values(), strict=True))
