"""A tiny anchored CNN and its drill graph, for the reproducer tests (no worker needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from anpred.interchange.drill_graph import DrillGraph, build_drill_graph
from anpred.interchange.export import AnchorOutput

#: The model input's shape.
SHAPE = (1, 3, 16, 16)


def tiny_cnn(path: Path | None = None, anchors_out: bool = True) -> onnx.ModelProto:
    """Conv/Relu (stage s1), Conv/Sigmoid/Add (stage s2), GlobalAveragePool/Flatten/Gemm
    (output), with module scopes in node names; every anchor a graph output unless
    ``anchors_out`` is false (the model a user brings: only the logits).
    """
    rng = np.random.default_rng(0)

    def init(name: str, shape: tuple[int, ...], scale: float = 0.3) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                       name)  # fmt: skip

    inits = [init("w1", (8, 3, 3, 3)), init("b1", (8,)), init("w2", (8, 8, 3, 3), 0.2),
             init("b2", (8,)), init("w3", (10, 8)), init("b3", (10,))]  # fmt: skip
    nodes = [
        helper.make_node(
            "Conv", ["images", "w1", "b1"], ["c1"], name="/block1/conv/Conv", pads=[1, 1, 1, 1]
        ),  # fmt: skip
        helper.make_node("Relu", ["c1"], ["r1"], name="/block1/act/Relu"),
        helper.make_node(
            "Conv", ["r1", "w2", "b2"], ["c2"], name="/block2/conv/Conv", pads=[1, 1, 1, 1]
        ),  # fmt: skip
        helper.make_node("Sigmoid", ["c2"], ["s2"], name="/block2/act/Sigmoid"),
        helper.make_node("Add", ["s2", "r1"], ["a2"], name="/block2/Add"),
        helper.make_node("GlobalAveragePool", ["a2"], ["p3"], name="/head/pool/GlobalAveragePool"),
        helper.make_node("Flatten", ["p3"], ["f3"], name="/head/Flatten"),
        helper.make_node("Gemm", ["f3", "w3", "b3"], ["logits"], name="/head/fc/Gemm", transB=1),
    ]
    outputs = [
        helper.make_tensor_value_info("r1", TensorProto.FLOAT, [1, 8, 16, 16]),
        helper.make_tensor_value_info("a2", TensorProto.FLOAT, [1, 8, 16, 16]),
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10]),
    ][0 if anchors_out else 2 :]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("images", TensorProto.FLOAT, list(SHAPE))],
        outputs, initializer=inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    if path is not None:
        onnx.save(model, str(path))
    return model


ANCHORS = [
    AnchorOutput("s1", "s1", "block1", "s1", "r1", (1, 8, 16, 16)),
    AnchorOutput("s2", "s2", "block2", "s2", "a2", (1, 8, 16, 16)),
    AnchorOutput("output", "output", "", "head", "logits", (1, 10)),
]


def tiny_drill_graph(stages: tuple[str, ...] = ("s2",)) -> DrillGraph:
    """The drill graph of ``stages`` of :func:`tiny_cnn`."""
    return build_drill_graph(tiny_cnn(), ANCHORS, "images", SHAPE, list(stages))
