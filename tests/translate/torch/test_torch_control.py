"""Control flow through the torch translators: subgraphs that read the enclosing graph.

ONNX's node tests for If/Loop/Scan (tests/translate/expectations) have branches of
constants only; here the subgraphs read a value computed outside (``r``) and an outer
initializer (``w``), as exported models' subgraphs do. Float64 against the evaluator.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from anpred.translate.graph import GraphProgram
from anpred.translate.torch import make_adapter

#: Float64 rounding (a handful of adds and multiplies): measured 0 here.
FP64_TOLERANCE = 1e-15

_D = TensorProto.DOUBLE


def _model(condition: bool) -> object:
    then_branch = helper.make_graph(
        [helper.make_node("Mul", ["r", "w"], ["t"])], "then", [],
        [helper.make_tensor_value_info("t", _D, [3])],
    )  # fmt: skip
    else_branch = helper.make_graph(
        [helper.make_node("Sub", ["r", "w"], ["e"])], "else", [],
        [helper.make_tensor_value_info("e", _D, [3])],
    )  # fmt: skip
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["acc_in", "chosen"], ["acc_out"]),
            helper.make_node("Mul", ["acc_out", "w"], ["scan_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", _D, [3]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", _D, [3]),
            helper.make_tensor_value_info("scan_out", _D, [3]),
        ],
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("If", ["c"], ["chosen"], then_branch=then_branch,
                         else_branch=else_branch),
        helper.make_node("Loop", ["trips", "keep", "zeros"], ["acc", "scans"], body=body),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "control",
        [helper.make_tensor_value_info("x", _D, [3])],
        [helper.make_tensor_value_info("acc", _D, [3]),
         helper.make_tensor_value_info("scans", _D, [4, 3])],
        [numpy_helper.from_array(np.array([0.5, 2.0, -1.5]), "w"),
         numpy_helper.from_array(np.array(condition), "c"),
         numpy_helper.from_array(np.array(4, dtype=np.int64), "trips"),
         numpy_helper.from_array(np.array(True), "keep"),
         numpy_helper.from_array(np.zeros(3), "zeros")],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("condition", [True, False])
def test_if_and_loop_read_the_enclosing_graph(condition: bool) -> None:
    model = _model(condition)
    feeds = {"x": np.array([1.0, -2.0, 3.0])}
    expected = ReferenceEvaluator(model).run(None, feeds)
    adapter = make_adapter({"dtype": "float64"})
    program = GraphProgram(model, adapter)
    values = program.run(feeds)
    for name, ref in zip(program.outputs, expected, strict=True):
        out = adapter.to_numpy(values[name])
        assert out.shape == ref.shape and out.dtype == np.float64
        assert np.max(np.abs(out - ref)) <= FP64_TOLERANCE * np.max(np.abs(ref))
    assert program.op_types == ["Relu", "If", "Loop"]
