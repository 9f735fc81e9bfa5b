"""The ops of magika's file-type classifier (a Keras model exported by tf2onnx, shipped in
its PyPI wheel), on a tiny graph built like it, through every library's translators.

magika's ``standard_v3_3/model.onnx`` cannot be fetched at test time; this graph repeats its
pattern at a small size: int32 bytes reshaped and broadcast (``Shape``, ``Slice``,
``Concat``, ``Cast``, ``Expand``), one-hot by ``Equal`` against a constant, embedded by
``MatMul``, GELU in its tanh form (``Mul``, ``Tanh``, ``Add``), LayerNorm as tf2onnx
writes flax's fast variance (``ReduceSum``, ``Sub``, ``Max``, ``Sqrt``, ``Reciprocal``),
``Transpose``, a 1-D ``Conv``, ``GlobalMaxPool``, ``Squeeze``, a dense layer and a softmax
written out (``ReduceMax``, ``Exp``, ``Div``). Each library runs it in its own process.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

#: Symbols, bytes per input, embedding width, conv channels, classes.
SYMBOLS, LENGTH, WIDTH, CHANNELS, CLASSES = 6, 8, 4, 5, 3
#: float32 graph vs onnxruntime (the reference implementation; ONNX's reference evaluator
#: gets GlobalMaxPool of a 1-D signal wrong: (2, 1) for (2, 5, 8)): sums of a few O(1)
#: products, 1e-5 is ~100 ulp of them.
TOLERANCE = 1e-5

_SCRIPT = """
import sys, numpy as np, onnx
from conformance.suite import _to_onnx_layout, make_library_adapter
from anpred.translate.graph import GraphProgram
adapter = make_library_adapter(sys.argv[1])
program = GraphProgram(onnx.load(sys.argv[2]), adapter)
value = program.run({"bytes": np.load(sys.argv[3])})["probs"]
np.save(sys.argv[4], np.asarray(_to_onnx_layout(adapter, value)))
"""


def magika_like() -> onnx.ModelProto:
    """The tiny magika-like graph (opset 15, as tf2onnx wrote magika's)."""
    rng = np.random.default_rng(0)

    def const(name: str, value: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(np.asarray(value), name)

    f32 = np.float32
    inits = [
        const("shape3", np.array([-1, LENGTH, 1], np.int64)),
        const("zero", np.array([0], np.int64)),
        const("one", np.array([1], np.int64)),
        const("tail", np.array([LENGTH, SYMBOLS], np.int32)),
        const("symbols", np.arange(SYMBOLS, dtype=np.int32)),
        const("embed", rng.standard_normal((SYMBOLS, WIDTH)).astype(f32)),
        const("c044", f32(0.044715)),
        const("c079", f32(0.7978846)),
        const("half", f32(0.5)),
        const("c1", f32(1.0)),
        const("axis2", np.array([2], np.int64)),
        const("inv_width", f32(1.0 / WIDTH)),
        const("floor", f32(0.0)),
        const("eps", f32(1e-6)),
        const("gamma", rng.uniform(0.5, 1.5, WIDTH).astype(f32)),
        const("conv_w", rng.standard_normal((CHANNELS, WIDTH, 3)).astype(f32)),
        const("conv_b", rng.standard_normal(CHANNELS).astype(f32)),
        const("dense", rng.standard_normal((CHANNELS, CLASSES)).astype(f32)),
    ]
    nodes = [
        helper.make_node("Reshape", ["bytes", "shape3"], ["col"]),
        helper.make_node("Shape", ["bytes"], ["shape"]),
        helper.make_node("Cast", ["shape"], ["shape32"], to=TensorProto.INT32),
        helper.make_node("Slice", ["shape32", "zero", "one", "zero"], ["batch"]),
        helper.make_node("Concat", ["batch", "tail"], ["target32"], axis=0),
        helper.make_node("Cast", ["target32"], ["target"], to=TensorProto.INT64),
        helper.make_node("Expand", ["col", "target"], ["wide"]),
        helper.make_node("Equal", ["wide", "symbols"], ["hot"]),
        helper.make_node("Cast", ["hot"], ["onehot"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["onehot", "embed"], ["e"]),
        # GELU, tanh form: 0.5 e (1 + tanh(0.798 (e + 0.0447 e^3)))
        helper.make_node("Mul", ["e", "e"], ["e2"]),
        helper.make_node("Mul", ["e2", "e"], ["e3"]),
        helper.make_node("Mul", ["e3", "c044"], ["e3s"]),
        helper.make_node("Add", ["e", "e3s"], ["inner"]),
        helper.make_node("Mul", ["inner", "c079"], ["scaled"]),
        helper.make_node("Tanh", ["scaled"], ["t"]),
        helper.make_node("Add", ["t", "c1"], ["t1"]),
        helper.make_node("Mul", ["t1", "half"], ["t1h"]),
        helper.make_node("Mul", ["e", "t1h"], ["g"]),
        # LayerNorm, fast variance: E[x^2] - E[x]^2, floored at 0
        helper.make_node("ReduceSum", ["g", "axis2"], ["s1"], keepdims=1),
        helper.make_node("Mul", ["g", "g"], ["g2"]),
        helper.make_node("ReduceSum", ["g2", "axis2"], ["s2"], keepdims=1),
        helper.make_node("Mul", ["s1", "inv_width"], ["mean"]),
        helper.make_node("Mul", ["s2", "inv_width"], ["mean2"]),
        helper.make_node("Mul", ["mean", "mean"], ["mean_sq"]),
        helper.make_node("Sub", ["mean2", "mean_sq"], ["var0"]),
        helper.make_node("Max", ["floor", "var0"], ["var"]),
        helper.make_node("Add", ["var", "eps"], ["var_eps"]),
        helper.make_node("Sqrt", ["var_eps"], ["std"]),
        helper.make_node("Reciprocal", ["std"], ["inv_std"]),
        helper.make_node("Mul", ["inv_std", "gamma"], ["factor"]),
        helper.make_node("Sub", ["g", "mean"], ["centred"]),
        helper.make_node("Mul", ["centred", "factor"], ["normed"]),
        helper.make_node("Transpose", ["normed"], ["nct"], perm=[0, 2, 1]),
        helper.make_node("Conv", ["nct", "conv_w", "conv_b"], ["conv"], pads=[1, 1]),
        helper.make_node("GlobalMaxPool", ["conv"], ["pooled"]),
        helper.make_node("Squeeze", ["pooled", "axis2"], ["features"]),
        helper.make_node("MatMul", ["features", "dense"], ["logits"]),
        helper.make_node("ReduceMax", ["logits"], ["top"], axes=[1], keepdims=1),
        helper.make_node("Sub", ["logits", "top"], ["shifted"]),
        helper.make_node("Exp", ["shifted"], ["ex"]),
        helper.make_node("ReduceSum", ["ex", "one"], ["total"], keepdims=1),
        helper.make_node("Div", ["ex", "total"], ["probs"]),
    ]
    graph = helper.make_graph(
        nodes, "magika_like",
        [helper.make_tensor_value_info("bytes", TensorProto.INT32, [2, LENGTH])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [2, CLASSES])],
        inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _bytes() -> np.ndarray:
    """Two inputs of byte values, padding included (the last symbol)."""
    values = np.random.default_rng(1).integers(0, SYMBOLS - 1, (2, LENGTH)).astype(np.int32)
    values[1, -3:] = SYMBOLS - 1
    return values


def test_the_graph_uses_magikas_ops() -> None:
    magika_ops = {
        "Add",
        "Cast",
        "Concat",
        "Conv",
        "Div",
        "Equal",
        "Exp",
        "Expand",
        "GlobalMaxPool",
        "MatMul",
        "Max",
        "Mul",
        "Reciprocal",
        "ReduceMax",
        "ReduceSum",
        "Reshape",
        "Shape",
        "Slice",
        "Sqrt",
        "Squeeze",
        "Sub",
        "Tanh",
        "Transpose",
    }  # magika standard_v3_3 minus Unsqueeze (a reshape of its class scores)
    assert {node.op_type for node in magika_like().graph.node} == magika_ops


@pytest.mark.parametrize("library", ["torch", "tensorflow", "jax", "paddle"])
def test_magika_like_graph_matches_the_reference(library: str, tmp_path: Path) -> None:
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed")
    env = dict(os.environ, HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"),
               JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")  # fmt: skip
    model, data = magika_like(), _bytes()
    onnx.save(model, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", data)
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, library, str(tmp_path / "m.onnx"),
         str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
        capture_output=True, text=True, env=env, timeout=300, cwd=Path(__file__).parent,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    onnxruntime = pytest.importorskip("onnxruntime")
    session = onnxruntime.InferenceSession(model.SerializeToString())
    (expected,) = session.run(None, {"bytes": data})
    actual = np.load(tmp_path / "y.npy")
    assert actual.shape == (2, CLASSES) and np.isfinite(actual).all()
    assert np.ptp(expected) > 0.01  # scores that differ: the graph is not degenerate
    np.testing.assert_allclose(actual, expected, rtol=TOLERANCE, atol=TOLERANCE)
