"""Drill graphs: the flagged stages' operators, cut out and fed from a packed input."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from anpred.errors import UsageError
from anpred.interchange.drill_graph import PACKED_INPUT, build_drill_graph, module_path
from anpred.interchange.export import AnchorOutput
from anpred.interchange.isolation import fed_name, isolation_model


def _anchored(opset: int = 17) -> tuple[onnx.ModelProto, list[AnchorOutput]]:
    """conv → relu (anchor a1) → conv → sigmoid (a2); a2 + a1-pooled skip → add (output)."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node(
            "Conv", ["images", "w1"], ["c1"], name="/model/b1/conv/Conv", pads=[1, 1, 1, 1]
        ),
        helper.make_node("Relu", ["c1"], ["a1"], name="/model/b1/act/Relu"),
        helper.make_node(
            "Conv", ["a1", "w2"], ["c2"], name="/model/b2/conv/Conv", pads=[1, 1, 1, 1]
        ),
        helper.make_node("Sigmoid", ["c2"], ["a2"], name="/model/b2/act/Sigmoid"),
        helper.make_node("Add", ["a2", "a1"], ["out"], name="/model/head/Add"),
    ]
    shape = [1, 4, 8, 8]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("out", "a1", "a2")],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    anchors = [
        AnchorOutput("b1", "b1", "b1", "b1", "a1", tuple(shape)),
        AnchorOutput("b2", "b2", "b2", "b2", "a2", tuple(shape)),
        AnchorOutput("output", "output", "", "head", "out", tuple(shape)),
    ]
    return model, anchors


def _run(model: onnx.ModelProto, feeds: dict, outputs: list[str]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(outputs, feeds)


def test_module_paths_from_torchscript_scopes() -> None:
    assert module_path("/model/model.4/cv1/conv/Conv") == "model.4.cv1.conv"
    assert module_path("/model/layer2/layer2.0/conv1/Conv") == "layer2.0.conv1"
    assert module_path("/model/layer2/layer2.3/Add") == "layer2.3"
    assert module_path("/model/model.22/cv2.0/cv2.0.0/conv/Conv") == "model.22.cv2.0.0.conv"
    assert (
        module_path("/model/features/features.4/block/block.0/block.0.0/Conv")
        == "features.4.block.0.0"
    )
    assert module_path("/model/Flatten") is None
    assert module_path("Conv_3") is None


def test_a_stage_is_cut_out_with_every_operator_exposed() -> None:
    model, anchors = _anchored()
    graph = build_drill_graph(model, anchors, "images", (1, 3, 8, 8), ["b2"])
    assert [(o.op_type, o.stage, o.module) for o in graph.ops] == [
        ("Conv", "b2", "b2.conv"),
        ("Sigmoid", "b2", "b2.act"),
    ]
    assert [(i.anchor, i.shape) for i in graph.inputs] == [("b1", (1, 4, 8, 8))]
    assert graph.packed_size == 4 * 8 * 8
    onnx.checker.check_model(graph.anchored)
    # fed the true stage input, the drill graph reproduces the model's own operators
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    full = onnx.ModelProto()
    full.CopyFrom(model)
    full.graph.output.append(helper.make_tensor_value_info("c2", TensorProto.FLOAT, None))
    a1, c2, a2 = _run(full, {"images": x}, ["a1", "c2", "a2"])
    packed = graph.pack({"b1": a1})
    names = [a.onnx_name for a in graph.anchors()]
    got = _run(graph.anchored, {PACKED_INPUT: packed}, names)
    np.testing.assert_array_equal(got[0], c2)
    np.testing.assert_array_equal(got[1], a2)
    np.testing.assert_array_equal(got[-1], a2)  # ``output`` repeats the last stage's anchor
    assert [a.key for a in graph.anchors()][-1] == "output"


def test_stages_reading_the_model_input_and_skips_pack_both() -> None:
    model, anchors = _anchored()
    graph = build_drill_graph(model, anchors, "images", (1, 3, 8, 8), ["output", "b1"])
    assert list(graph.stages) == ["b1", "output"]
    assert {i.anchor for i in graph.inputs} == {None, "b1", "b2"}
    assert [o.op_type for o in graph.ops] == ["Conv", "Relu", "Add"]


def test_isolation_cut_at_operators_gives_each_operators_own_error() -> None:
    model, anchors = _anchored()
    graph = build_drill_graph(model, anchors, "images", (1, 3, 8, 8), ["b2"])
    names = [a.onnx_name for a in graph.anchors()]
    cut, consumed = isolation_model(graph.anchored, names)
    conv = graph.ops[0].output
    assert conv in consumed
    rng = np.random.default_rng(2)
    packed = rng.standard_normal(graph.packed_size).astype(np.float32)
    fed = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    feeds = {PACKED_INPUT: packed, **{fed_name(n): fed for n in consumed}}
    (sigmoid,) = _run(cut, feeds, [graph.ops[1].output])
    np.testing.assert_allclose(sigmoid, 1 / (1 + np.exp(-fed)), rtol=1e-6)


def test_unknown_stage_is_a_usage_error() -> None:
    model, anchors = _anchored()
    with pytest.raises(UsageError, match="unknown stage"):
        build_drill_graph(model, anchors, "images", (1, 3, 8, 8), ["nope"])


def test_opset9_graph_unpacks_with_slice_attributes() -> None:
    """Before opset 10 ``Slice`` takes its bounds as attributes (the onnx package's light
    models are opset 9: their drill-down failed to load everywhere).
    """
    model, anchors = _anchored(opset=9)
    model.ir_version = 4
    graph = build_drill_graph(model, anchors, "images", (1, 3, 8, 8), ["output", "b1"])
    onnx.checker.check_model(graph.anchored, full_check=True)
    slices = [n for n in graph.anchored.graph.node if n.op_type == "Slice"]
    assert len(slices) == 3 and all(len(n.input) == 1 for n in slices)
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    a1, a2, out = _run(model, {"images": x}, ["a1", "a2", "out"])
    packed = graph.pack({None: x, "b1": a1, "b2": a2})
    relu, add = (op.output for op in graph.ops[1:])
    got_relu, got_add = _run(graph.anchored, {PACKED_INPUT: packed}, [relu, add])
    np.testing.assert_array_equal(got_relu, a1)  # unpacked from the model input
    np.testing.assert_array_equal(got_add, out)  # unpacked from the b1 and b2 anchors


def test_constant_subgraph_outputs_are_not_exposed() -> None:
    # A weight computed by nodes (e.g. Shape arithmetic, dequantisation) does not depend on
    # the stage input: exposing it measured nothing and broke onnx2tf / XNNPACK lowering.
    model, anchors = _anchored()
    model.graph.node.insert(
        2, helper.make_node("Neg", ["w2"], ["w2neg"], name="/model/b2/conv/Neg")
    )
    model.graph.node[3].input[1] = "w2neg"
    graph = build_drill_graph(model, anchors, "images", (1, 3, 8, 8), ["b2"])
    assert [o.op_type for o in graph.ops] == ["Conv", "Sigmoid"]
    onnx.checker.check_model(graph.anchored)
