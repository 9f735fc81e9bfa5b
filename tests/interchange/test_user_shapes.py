"""A user's ONNX file with dynamic dimensions: ``--input-shape``, refusal, shape folding."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from anpred.errors import UsageError
from anpred.interchange.folding import fold_shapes
from anpred.interchange.input_shapes import (
    fix_input_shapes,
    graph_inputs,
    parse_input_shapes,
    resolve_input_shapes,
)


def _dynamic_cnn() -> onnx.ModelProto:
    """Conv on a [batch, 3, h, w] image, then shape arithmetic (as torch/paddle export a
    flatten): Shape → Gather(0) → Unsqueeze → Concat(-1) → Reshape."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array([0], np.int64), "axes"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Shape", ["r"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["r", "target"], ["flat"]),
        helper.make_node("Sigmoid", ["flat"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "dyn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "k"])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_dynamic_dims_are_refused_naming_them_and_the_flag() -> None:
    model = _dynamic_cnn()
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 5  # not an image
    with pytest.raises(UsageError) as err:
        resolve_input_shapes(graph_inputs(model), {}, 640, "dyn.onnx")
    message = str(err.value)
    assert "\n" not in message
    assert "batch, h, w" in message and "--input-shape x=Nx5xNxN" in message


def test_input_shape_flag_and_image_default() -> None:
    inputs = graph_inputs(_dynamic_cnn())
    assert resolve_input_shapes(inputs, parse_input_shapes(["1x3x32x48"]), None, "m") == {
        "x": (1, 3, 32, 48)
    }
    assert resolve_input_shapes(inputs, parse_input_shapes(["x=2x3x8x8"]), None, "m") == {
        "x": (2, 3, 8, 8)
    }
    # omitted on an image input: batch 1, the preprocessing's side
    assert resolve_input_shapes(inputs, {}, 224, "m") == {"x": (1, 3, 224, 224)}
    with pytest.raises(UsageError, match="fixed to 3"):
        resolve_input_shapes(inputs, parse_input_shapes(["1x4x8x8"]), None, "m")
    with pytest.raises(UsageError, match="not an input"):
        resolve_input_shapes(inputs, parse_input_shapes(["img=1x3x8x8"]), None, "m")
    with pytest.raises(UsageError, match="rank"):
        resolve_input_shapes(inputs, parse_input_shapes(["1x3x8"]), None, "m")
    for bad in (["1x3xHx8"], ["x=0x3x8x8"], ["=1x3"]):
        with pytest.raises(UsageError):
            parse_input_shapes(bad)


def test_shape_arithmetic_is_folded_and_verified() -> None:
    model = _dynamic_cnn()
    shapes = {"x": (1, 3, 8, 8)}
    fix_input_shapes(model, shapes)
    folded, record = fold_shapes(model, shapes)
    assert record["used"] is True, record
    assert {"Shape", "Gather", "Unsqueeze", "Concat"} <= set(record["removed_ops"])
    assert not {"Shape", "Gather"} & {n.op_type for n in folded.graph.node}
    assert {n.op_type for n in folded.graph.node} >= {"Conv", "Relu", "Reshape", "Sigmoid"}
    (out,) = record["outputs"]
    # shape folding leaves the float math alone: bit-identical on onnxruntime
    assert out["ok"] and out["max_abs_diff"] == 0.0
    json.dumps(record)  # the record goes to the run directory as JSON


def test_folding_that_changes_outputs_is_refused(monkeypatch) -> None:
    import onnxslim

    model = _dynamic_cnn()
    shapes = {"x": (1, 3, 8, 8)}
    fix_input_shapes(model, shapes)

    real_slim = onnxslim.slim

    def wrong_slim(m: onnx.ModelProto, **kwargs: object) -> onnx.ModelProto:
        slimmed = real_slim(m, **kwargs)
        for node in slimmed.graph.node:
            if node.op_type == "Sigmoid":
                node.op_type = "Tanh"  # a "simplifier" that changes the math
        return slimmed

    monkeypatch.setattr(onnxslim, "slim", wrong_slim)
    kept, record = fold_shapes(model, shapes)
    assert kept is model and record["used"] is False
    assert record["reason"].startswith("refused")


def test_folding_leaves_the_original_alone_and_keeps_ir3_initializers_as_inputs() -> None:
    """IR < 4 graphs list every initializer as an input (the onnx package's resnet50 has an
    unused one); onnxslim drops such inputs, and edits the graph it is given."""
    model = _dynamic_cnn()
    model.ir_version = 3
    for init in model.graph.initializer:
        model.graph.input.append(
            helper.make_tensor_value_info(init.name, init.data_type, list(init.dims))
        )
    model.graph.initializer.append(numpy_helper.from_array(np.zeros((1, 1), np.float32), "unused"))
    model.graph.input.append(helper.make_tensor_value_info("unused", TensorProto.FLOAT, [1, 1]))
    shapes = {"x": (1, 3, 8, 8)}
    fix_input_shapes(model, shapes)
    before = model.SerializeToString()
    folded, record = fold_shapes(model, shapes)
    assert model.SerializeToString() == before
    assert record["used"] is True, record
    inits = {i.name for i in folded.graph.initializer}
    assert inits <= {i.name for i in folded.graph.input}
