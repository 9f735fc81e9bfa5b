"""A tiny ONNX CNN with module scopes in its node names, like the legacy torch exporter's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def tiny_cnn(path: Path, size: int = 32, extra_op: str | None = None) -> Path:
    """Write a 3-block CNN (conv/relu, conv/sigmoid, pool/gemm) to ``path``.

    Args:
        path: Where to write the model.
        size: Input side.
        extra_op: An op type appended before the output (e.g. one no library translates).
    """
    rng = np.random.default_rng(0)

    def init(name: str, shape: tuple[int, ...], scale: float = 0.3) -> onnx.TensorProto:
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name
        )

    inits = [
        init("w1", (8, 3, 3, 3)),
        init("b1", (8,)),
        init("w2", (16, 8, 3, 3), 0.2),
        init("b2", (16,)),
        init("w3", (10, 16), 0.3),
        init("b3", (10,)),
    ]
    nodes = [
        helper.make_node(
            "Conv", ["images", "w1", "b1"], ["c1"], name="/block1/conv/Conv", pads=[1, 1, 1, 1]
        ),
        helper.make_node("Relu", ["c1"], ["r1"], name="/block1/act/Relu"),
        helper.make_node(
            "Conv",
            ["r1", "w2", "b2"],
            ["c2"],
            name="/block2/conv/Conv",
            pads=[1, 1, 1, 1],
            strides=[2, 2],
        ),
        helper.make_node("Sigmoid", ["c2"], ["s2"], name="/block2/act/Sigmoid"),
        helper.make_node("GlobalAveragePool", ["s2"], ["p3"], name="/head/pool/GlobalAveragePool"),
        helper.make_node("Flatten", ["p3"], ["f3"], name="/head/Flatten"),
        helper.make_node("Gemm", ["f3", "w3", "b3"], ["logits"], name="/head/fc/Gemm", transB=1),
    ]
    output = "logits"
    if extra_op:
        nodes.append(helper.make_node(extra_op, ["logits"], ["extra"], name=f"/tail/{extra_op}"))
        output = "extra"
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, [1, 10])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path
