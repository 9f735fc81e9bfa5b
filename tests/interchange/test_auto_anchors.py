"""Automatic stage anchors on a graph without module scopes (built here, nodes unnamed)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from anpred.interchange.auto_anchors import auto_anchors, cut_points, has_scopes


def _unnamed_net(blocks: int = 4) -> onnx.ModelProto:
    """``blocks`` residual blocks (conv → relu, plus a skip Add), unnamed like paddle2onnx's.

    Inside a block the input is live on two paths (conv branch and skip), so only the Add
    outputs (and the stem's) are cut points; the conv/relu tensors inside are not.
    """
    rng = np.random.default_rng(0)
    inits, nodes = [], []
    x = "x"
    nodes.append(helper.make_node("Relu", [x], ["stem"]))
    x = "stem"
    for b in range(blocks):
        w = f"w{b}"
        inits.append(
            numpy_helper.from_array((rng.standard_normal((4, 4, 3, 3)) * 0.2).astype(np.float32), w)
        )
        nodes += [
            helper.make_node("Conv", [x, w], [f"c{b}"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", [f"c{b}"], [f"r{b}"]),
            helper.make_node("Add", [x, f"r{b}"], [f"a{b}"]),
        ]
        x = f"a{b}"
    nodes.append(helper.make_node("Sigmoid", [x], ["y"]))
    graph = helper.make_graph(
        nodes,
        "unnamed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return onnx.shape_inference.infer_shapes(model)


def test_cut_points_are_the_tensors_every_path_passes() -> None:
    model = _unnamed_net()
    assert not has_scopes(model)
    assert [t for _, t in cut_points(model)] == ["stem", "a0", "a1", "a2", "a3"]


def test_k_stages_of_equal_cost_named_by_position_and_op() -> None:
    model = _unnamed_net()
    # 4 equal blocks; K=2 cuts at the middle of the cost, after block 2 of 4
    assert auto_anchors(model, 2) == [("stage1.Add", "a1")]
    assert auto_anchors(model, 4) == [
        ("stage1.Add", "a0"),
        ("stage2.Add", "a1"),
        ("stage3.Add", "a2"),
    ]
    # more stages than cut points: every cut point, once, in order
    assert [t for _, t in auto_anchors(model, 32)] == ["stem", "a0", "a1", "a2", "a3"]


def test_scoped_graphs_are_recognised() -> None:
    model = _unnamed_net()
    model.graph.node[1].name = "/layer1/conv/Conv"
    assert has_scopes(model)
