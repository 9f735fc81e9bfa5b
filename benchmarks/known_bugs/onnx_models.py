"""The known bugs' models that exist only as ONNX files (an opset or operators the torch
exporter does not give: a converted Keras pool at opset 19, a QDQ-quantized conv, ONNX's own
Attention), built deterministically with onnx and numpy (no torch).

``python onnx_models.py NAME FOLDER`` writes one (``anpred eval --known-bugs`` does, for the
``onnx:NAME`` models of ``configs/known-bugs.json``); ``anpred run FOLDER/NAME.onnx`` runs it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def avgpool_same_onnx() -> bytes:
    """A converted Keras block at opset 19: Conv 3x3 "same", ReLU, then 2x2 stride-1
    ``AveragePool`` padded at the bottom/right only with ``count_include_pad=1`` (what a
    TF "same" pool becomes). onnxruntime #26708 (buggy 1.24.1, fixed 1.25.1).
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    b = (rng.standard_normal(8) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node(
            "AveragePool",
            ["r"],
            ["y"],
            kernel_shape=[2, 2],
            strides=[1, 1],
            pads=[0, 0, 1, 1],
            count_include_pad=1,
        ),  # fmt: skip
    ]
    graph = helper.make_graph(
        nodes, "keras_same_avgpool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 32, 32])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 19)])
    model.ir_version = 9
    return model.SerializeToString()


def qdq_conv_onnx() -> bytes:
    """A statically quantized conv stem in QDQ form (what onnxruntime's quantizer writes):
    u8 activations, s8 weights, i32 bias, Conv 3->24 3x3 stride 2, ReLU after the
    dequantization. onnxruntime fuses it into a ``QLinearConv``, which 1.23.1/1.24.1 get
    wrong on CPUs with AVX512-VNNI / AMX-INT8 (onnxruntime #26324; 1.25.1 correct).
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    xs, ws, ys = 0.02, 0.004, 0.05
    w = rng.integers(-127, 128, (24, 3, 3, 3), dtype=np.int8)
    bias = rng.integers(-2000, 2000, 24).astype(np.int32)
    inits = [
        numpy_helper.from_array(np.array(xs, np.float32), "xs"),
        numpy_helper.from_array(np.array(114, np.uint8), "xz"),
        numpy_helper.from_array(w, "wq"),
        numpy_helper.from_array(np.array(ws, np.float32), "ws"),
        numpy_helper.from_array(np.array(0, np.int8), "wz"),
        numpy_helper.from_array(bias, "bq"),
        numpy_helper.from_array(np.array(xs * ws, np.float32), "bs"),
        numpy_helper.from_array(np.array(0, np.int32), "bz"),
        numpy_helper.from_array(np.array(ys, np.float32), "ys"),
        numpy_helper.from_array(np.array(128, np.uint8), "yz"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"]),
        helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"]),
        helper.make_node(
            "Conv", ["xd", "wd", "bd"], ["c"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4
        ),  # fmt: skip
        helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"]),
        helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["cd"]),
        helper.make_node("Relu", ["cd"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "qdq_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 24, 32, 32])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def attention_softcap_onnx() -> bytes:
    """A Gemma-2-style self-attention block at opset 23: Q/K/V projections of a 1x8x32
    sequence, ONNX's ``Attention`` (2 heads, ``softcap=5``) with a learnt relative-position
    bias as its float mask, and the output projection. onnxruntime's CPU kernel added the
    mask before the softcap until PR #28379 (buggy 1.25.1, fixed 1.28.0).
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    e, s = 32, 8
    weights = {n: (rng.standard_normal((e, e)) / np.sqrt(e)).astype(np.float32) * 2
               for n in ("wq", "wk", "wv", "wo")}  # fmt: skip
    bias = (rng.standard_normal((s, s)) * 3).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("MatMul", ["x", "wv"], ["v"]),
        helper.make_node(
            "Attention", ["q", "k", "v", "bias"], ["a"], q_num_heads=2, kv_num_heads=2, softcap=5.0
        ),  # fmt: skip
        helper.make_node("MatMul", ["a", "wo"], ["y"]),
    ]
    inits = [numpy_helper.from_array(w, n) for n, w in weights.items()]
    inits.append(numpy_helper.from_array(bias, "bias"))
    graph = helper.make_graph(
        nodes, "attention_softcap",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, e])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, s, e])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 23)])
    model.ir_version = 10
    return model.SerializeToString()


#: name -> builder of the serialized model.
ONNX_MODELS = {
    "avgpool_same": avgpool_same_onnx,
    "qdq_conv": qdq_conv_onnx,
    "attention_softcap": attention_softcap_onnx,
}


def write_onnx(name: str, folder: Path) -> Path:
    """Write ONNX model ``name`` (:data:`ONNX_MODELS`) into ``folder``; its path."""
    path = Path(folder) / f"{name}.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(ONNX_MODELS[name]())
    return path


if __name__ == "__main__":  # python onnx_models.py NAME FOLDER: write one model
    print(write_onnx(sys.argv[1], Path(sys.argv[2])))
