"""The float64 reference that never blocks: ONNX's evaluator when torch lacks a translator.

The model: Conv -> an op in its own domain (a model-local function, ``x -> tanh(x / 2)``),
which no translator has -> Conv -> Relu. Its float64 reference comes from the evaluator;
the same graph with the function inlined is translatable, and the torch translation of
that in float64 is the exact reference the evaluator must reproduce.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

torch = pytest.importorskip("torch")

from anpred.backends.base import ModelJob  # noqa: E402
from anpred.backends.torch_runner import TorchGraphRunner  # noqa: E402
from anpred.errors import MissingTranslatorError  # noqa: E402
from anpred.interchange.export import AnchoredExport, AnchorOutput  # noqa: E402
from anpred.translate.evaluator_reference import (  # noqa: E402
    SOURCE,
    EvaluatorGraph,
    make_adapter,
)
from anpred.translate.graph import GraphProgram  # noqa: E402
from anpred.translate.torch import make_adapter as torch_adapter  # noqa: E402

#: torch's float64 translation and the evaluator's float64 graph agree to rounding: 2.2e-16
#: measured (max-abs relative); the bound of test_torch_float64_node_tests.py.
FP64_TOLERANCE = 1e-13
SHAPE = (1, 3, 16, 16)


def tiny_model() -> onnx.ModelProto:
    """Conv, ScaledTanh (com.example, a local function), Conv, Relu; anchors t1 and y."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * np.float32(0.3)
    w2 = rng.standard_normal((4, 8, 3, 3)).astype(np.float32) * np.float32(0.3)
    body = [
        helper.make_node("Constant", [], ["h"], value_float=0.5),
        helper.make_node("Mul", ["X", "h"], ["m"]),
        helper.make_node("Tanh", ["m"], ["Y"]),
    ]
    function = helper.make_function(
        "com.example", "ScaledTanh", ["X"], ["Y"], body, [helper.make_opsetid("", 17)]
    )
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("ScaledTanh", ["c1"], ["t1"], domain="com.example", name="act"),
        helper.make_node("Conv", ["t1", "w2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Relu", ["c2"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    model = helper.make_model(graph, opset_imports=opsets, functions=[function])
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


def _feed() -> np.ndarray:
    return np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)


def _exact(model: onnx.ModelProto, outputs: list[str]) -> dict[str, np.ndarray]:
    """The torch float64 translation of the model with its function inlined."""
    from onnx.inliner import inline_local_functions

    program = GraphProgram(
        inline_local_functions(model), torch_adapter({"dtype": "float64"}), outputs=outputs
    )
    values = program.run({"x": _feed()})
    return {name: values[name].numpy() for name in outputs}


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def test_torch_has_no_translator_for_the_function_op() -> None:
    with pytest.raises(MissingTranslatorError, match="com.example.ScaledTanh"):
        GraphProgram(tiny_model(), torch_adapter({"dtype": "float64"}))


def test_evaluator_graph_is_the_float64_reference_of_the_graph() -> None:
    model = tiny_model()
    graph = EvaluatorGraph(model, make_adapter(), outputs=["t1", "y"])
    values = graph.run({"x": _feed()})
    exact = _exact(model, ["t1", "y"])
    for name in ("t1", "y"):
        assert values[name].dtype == np.float64
        assert _rel(values[name], exact[name]) <= FP64_TOLERANCE
    assert graph.op_types == ["Conv", "ScaledTanh", "Relu"]


def test_evaluator_graph_takes_no_node_hooks() -> None:
    with pytest.raises(Exception, match="per-node hooks"):
        EvaluatorGraph(tiny_model(), make_adapter(), hook=lambda call, values: values)


def _job(folder: Path) -> ModelJob:
    model = tiny_model()
    anchored = onnx.ModelProto()
    anchored.CopyFrom(model)
    anchored.graph.output.insert(
        0, helper.make_tensor_value_info("t1", TensorProto.FLOAT, [1, 8, 16, 16])
    )
    onnx.save(anchored, str(folder / "anchored.onnx"))
    onnx.save(model, str(folder / "plain.onnx"))
    anchors = (
        AnchorOutput("act", "act", "", "user", "t1", (1, 8, 16, 16)),
        AnchorOutput("output", "output", "", "head", "y", (1, 4, 16, 16)),
    )
    return ModelJob(AnchoredExport(folder, "x", SHAPE, 17, anchors))


def test_the_float64_reference_falls_back_and_records_its_source(tmp_path: Path) -> None:
    job = _job(tmp_path)
    runner = TorchGraphRunner({"dtype": "float64"})
    runner.activate(job)
    capture = runner.infer(_feed())
    exact = _exact(tiny_model(), ["t1", "y"])
    assert _rel(capture.arrays["act"], exact["t1"]) <= FP64_TOLERANCE
    assert _rel(capture.arrays["output"], exact["y"]) <= FP64_TOLERANCE
    plain = runner.infer_plain(_feed())
    assert plain.dtype == np.float64 and _rel(plain, exact["y"]) <= FP64_TOLERANCE
    isolated = runner.isolate(_feed(), {"act": exact["t1"]})
    assert _rel(isolated.arrays["output"], exact["y"]) <= FP64_TOLERANCE
    settings = runner.describe_settings()
    assert settings["reference_source"] == SOURCE
    assert settings["execution"].startswith("onnx.reference.ReferenceEvaluator")
    assert "com.example.ScaledTanh" in settings["fallback_reason"]


def test_a_float32_participant_that_lacks_the_op_fails(tmp_path: Path) -> None:
    runner = TorchGraphRunner({})
    with pytest.raises(MissingTranslatorError, match="no torch translator"):
        runner.activate(_job(tmp_path))
