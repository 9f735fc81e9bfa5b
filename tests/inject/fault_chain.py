"""A small anchored ONNX chain that has every op a fault kind targets, as an export.

Stages (anchor key: ops)::

    s1:     Conv(3→8, 3x3) → BatchNormalization (small running variances, so eps matters)
    s2:     Conv(8→8, 3x3)                  (the anchor is the Conv's own output)
    s3:     Sigmoid → Mul                   (SiLU of s2)
    s4:     Transpose(NHWC) → LayerNormalization(axis -1)
    output: MatMul → Erf, Tanh, Exp → Mul, Add

Imported by the tests (no DL library) and by ``fault_check.py`` in its subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from anpred.interchange.export import AnchoredExport, AnchorOutput

INPUT_SHAPE = (1, 3, 16, 16)
#: Anchor key → (ONNX tensor, shape), in topological order.
ANCHORS = {
    "s1": ("anchor.s1", (1, 8, 16, 16)),
    "s2": ("anchor.s2", (1, 8, 16, 16)),
    "s3": ("anchor.s3", (1, 8, 16, 16)),
    "s4": ("anchor.s4", (1, 16, 16, 8)),
    "output": ("anchor.output", (1, 16, 16, 8)),
}
#: Node names, per stage (fault targets are checked against these).
NODES = {
    "s1": ["/s1/Conv", "/s1/BatchNormalization"],
    "s2": ["/s2/Conv"],
    "s3": ["/s3/Sigmoid", "/s3/Mul"],
    "s4": ["/s4/Transpose", "/s4/LayerNormalization"],
    "output": [
        "/head/MatMul",
        "/head/Erf",
        "/head/Tanh",
        "/head/Scale",
        "/head/Exp",
        "/head/Mul",
        "/head/Add",
    ],
}


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    """The chain's initializers (seeded)."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    return {
        "w1": (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(f32),
        "b1": (rng.standard_normal(8) * 0.1).astype(f32),
        "bn_scale": rng.uniform(0.5, 1.5, 8).astype(f32),
        "bn_bias": (rng.standard_normal(8) * 0.1).astype(f32),
        "bn_mean": (rng.standard_normal(8) * 0.1).astype(f32),
        "bn_var": rng.uniform(2e-4, 1e-3, 8).astype(f32),
        "w2": (rng.standard_normal((8, 8, 3, 3)) * 0.02).astype(f32),
        "b2": (rng.standard_normal(8) * 0.1).astype(f32),
        "ln_scale": rng.uniform(0.5, 1.5, 8).astype(f32),
        "ln_bias": (rng.standard_normal(8) * 0.1).astype(f32),
        "w_head": (rng.standard_normal((8, 8)) * 0.4).astype(f32),
        "half": np.asarray(-0.5, f32),
    }


def feed(seed: int = 1) -> np.ndarray:
    """The chain's input."""
    return np.random.default_rng(seed).standard_normal(INPUT_SHAPE).astype(np.float32)


def _nodes() -> list[onnx.NodeProto]:
    a = {k: v[0] for k, v in ANCHORS.items()}
    node = helper.make_node
    return [
        node("Conv", ["images", "w1", "b1"], ["c1"], name="/s1/Conv", pads=[1, 1, 1, 1]),
        node(
            "BatchNormalization",
            ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"],
            [a["s1"]],
            name="/s1/BatchNormalization",
            epsilon=1e-5,
        ),
        node("Conv", [a["s1"], "w2", "b2"], [a["s2"]], name="/s2/Conv", pads=[1, 1, 1, 1]),
        node("Sigmoid", [a["s2"]], ["sig"], name="/s3/Sigmoid"),
        node("Mul", [a["s2"], "sig"], [a["s3"]], name="/s3/Mul"),
        node("Transpose", [a["s3"]], ["nhwc"], name="/s4/Transpose", perm=[0, 2, 3, 1]),
        node(
            "LayerNormalization",
            ["nhwc", "ln_scale", "ln_bias"],
            [a["s4"]],
            name="/s4/LayerNormalization",
            axis=-1,
            epsilon=1e-5,
        ),
        node("MatMul", [a["s4"], "w_head"], ["m"], name="/head/MatMul"),
        node("Erf", ["m"], ["erf"], name="/head/Erf"),
        node("Tanh", ["m"], ["tanh"], name="/head/Tanh"),
        node("Mul", ["m", "half"], ["m_half"], name="/head/Scale"),
        node("Exp", ["m_half"], ["exp"], name="/head/Exp"),
        node("Mul", ["tanh", "exp"], ["te"], name="/head/Mul"),
        node("Add", ["erf", "te"], [a["output"]], name="/head/Add"),
    ]


def _model(outputs: list[str]) -> onnx.ModelProto:
    shapes = {name: shape for name, shape in ANCHORS.values()}
    graph = helper.make_graph(
        _nodes(),
        "fault_chain",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, list(INPUT_SHAPE))],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, list(shapes[o])) for o in outputs],
        initializer=[numpy_helper.from_array(v, k) for k, v in weights().items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def build_export(folder: Path) -> AnchoredExport:
    """Write ``anchored.onnx``/``plain.onnx``/``export.json`` into ``folder``; return the export."""
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(_model([name for name, _ in ANCHORS.values()]), str(folder / "anchored.onnx"))
    onnx.save(_model([ANCHORS["output"][0]]), str(folder / "plain.onnx"))
    anchors = tuple(
        AnchorOutput(key, key, "" if key == "output" else key, "chain", name, shape)
        for key, (name, shape) in ANCHORS.items()
    )
    export = AnchoredExport(folder, "images", INPUT_SHAPE, 17, anchors)
    (folder / "export.json").write_text(json.dumps(export.to_dict()))
    return export
