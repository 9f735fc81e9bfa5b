"""A user's ONNX file that declares its anchors as graph outputs ``anchor.<key>``."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from anpred.pipeline.user_onnx import anchored_user_export, declared_anchors


def _declared_net() -> onnx.ModelProto:
    """x -> Relu -> Mul(2) -> Add(1), with the Relu and Mul results declared as anchors."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Identity", ["r"], ["anchor.block0"]),
        helper.make_node("Mul", ["r", "two"], ["m"]),
        helper.make_node("Identity", ["m"], ["anchor.block1"]),
        helper.make_node("Add", ["m", "one"], ["anchor.output"]),
    ]
    shape = [1, 4]
    graph = helper.make_graph(
        nodes,
        "declared",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)
         for n in ("anchor.output", "anchor.block0", "anchor.block1")],  # fmt: skip
        [numpy_helper.from_array(np.array(2.0, np.float32), "two"),
         numpy_helper.from_array(np.array(1.0, np.float32), "one")],  # fmt: skip
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_declared_outputs_are_the_anchors_in_their_order(tmp_path) -> None:
    model = _declared_net()
    assert declared_anchors(model) == [("block0", "anchor.block0"), ("block1", "anchor.block1")]
    path = tmp_path / "declared.onnx"
    onnx.save(model, str(path))
    export = anchored_user_export(path, tmp_path / "export")
    keys = [a.key for a in export.anchors]
    assert keys == ["block0", "block1", "output"]
    assert [a.onnx_name for a in export.anchors][:2] == ["anchor.block0", "anchor.block1"]
    plain = onnx.load(str(tmp_path / "export" / "plain.onnx"))
    assert [o.name for o in plain.graph.output] == ["anchor.output"]


def test_explicit_anchors_and_stages_win_over_declared_ones(tmp_path) -> None:
    path = tmp_path / "declared.onnx"
    onnx.save(_declared_net(), str(path))
    export = anchored_user_export(path, tmp_path / "e1", anchors=["anchor.block1"])
    assert [a.key for a in export.anchors] == ["anchor.block1", "output"]
    export = anchored_user_export(path, tmp_path / "e2", stages=2)
    assert "block0" not in [a.key for a in export.anchors]
