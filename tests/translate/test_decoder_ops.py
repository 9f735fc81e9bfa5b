"""ConvTranspose, Upsample, LRN, LSTM and GRU: the library-independent parts, DL-free.

The geometry (:mod:`anpred.translate.transposed_window`), the Upsample-as-Resize node and
the recurrence written once over a library's operators (:mod:`anpred.translate.recurrent`,
run here on numpy operators) are checked against ONNX's own backend test data; so are the
fixes of the reference evaluator the conformance suite relies on (grouped ConvTranspose,
LRN). ConvTranspose windows that need the translators' crop / zero-extension paths (an
odd ``output_shape`` crop, one beyond the full result, an output padding not below the
stride, which ONNX's reference evaluator cannot compute) run through every library's
translator in a subprocess (slow) against the unpadded reference ConvTranspose cropped and
zero-extended by hand.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conformance.backend_tests import load_tests
from conformance.reference import evaluate
from onnx import helper

from anpred.errors import UsageError
from anpred.translate import recurrent
from anpred.translate.registry import NodeCall
from anpred.translate.transposed_window import transposed_window
from anpred.translate.upsample import as_resize


def _backend(name: str):  # type: ignore[no-untyped-def]
    return next(t for t in load_tests() if t.name == name)


def _call(test_name: str) -> NodeCall:
    test = _backend(test_name)
    node = test.model.graph.node[0]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    opset = test.model.opset_import[0].version
    return NodeCall(node.op_type, node.name, attrs, opset, consts=tuple(test.inputs))


_CONV_T = [t.name for t in load_tests() if t.name.startswith("test_convtranspose")]


@pytest.mark.parametrize("name", _CONV_T)
def test_transposed_window_gives_onnx_output_shapes(name: str) -> None:
    test = _backend(name)
    x, w = test.inputs[:2]
    win = transposed_window(_call(name), list(x.shape[2:]), list(w.shape[2:]))
    assert win.out == test.outputs[0].shape[2:]
    geometry = zip(win.full, win.strides, x.shape[2:], w.shape[2:], win.dilations, strict=True)
    assert all(f == s * (i - 1) + (k - 1) * d + 1 for f, s, i, k, d in geometry)


def test_transposed_window_odd_total_pad_and_output_shape_beyond_full() -> None:
    call = NodeCall("ConvTranspose", "n", {"strides": [2, 2], "output_shape": [6, 7]}, 17)
    win = transposed_window(call, [3, 3], [3, 3])
    assert win.full == (7, 7) and win.out == (6, 7)
    assert win.begin == (1, 0) and win.end_pad == (0, 0)  # the spec: the odd pad first
    upper = NodeCall("ConvTranspose", "n", {**call.attrs, "auto_pad": "SAME_UPPER"}, 17)
    assert transposed_window(upper, [3, 3], [3, 3]).begin == (0, 0)
    beyond = NodeCall("ConvTranspose", "n", {"strides": [2, 2], "output_shape": [8, 9]}, 17)
    grown = transposed_window(beyond, [3, 3], [3, 3])  # totals -1, -2: zeros appended
    assert grown.begin == (0, -1) and grown.end_pad == (1, 1)


_FIXED = ["test_convtranspose_group_2", "test_convtranspose_group_2_image_3", "test_lrn",
          "test_lrn_default"]  # fmt: skip


@pytest.mark.parametrize("name", _FIXED)
def test_reference_evaluator_fixes_match_onnx_test_data(name: str) -> None:
    test = _backend(name)
    feeds = {vi.name: v for vi, v in zip(test.model.graph.input, test.inputs, strict=True)}
    (out,) = evaluate(test.model, feeds)
    np.testing.assert_allclose(out, test.outputs[0], rtol=1e-5, atol=1e-6)


def test_upsample_becomes_an_asymmetric_floor_resize() -> None:
    scales = np.array([1, 1, 2, 3], np.float32)
    call9 = NodeCall("Upsample", "u", {"mode": "nearest"}, 9, consts=(None, scales),
                     input_shapes=((1, 2, 3, 4), (4,)))  # fmt: skip
    resize = as_resize(call9)
    assert resize.op_type == "Resize" and resize.opset >= 11
    assert resize.attrs == {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                            "nearest_mode": "floor"}  # fmt: skip
    np.testing.assert_array_equal(resize.const(2), scales)
    call7 = NodeCall("Upsample", "u", {"mode": b"bilinear", "scales": [1.0, 1.0, 2.0, 2.0]}, 7)
    assert as_resize(call7).attrs["mode"] == "linear"
    np.testing.assert_array_equal(as_resize(call7).const(2), [1, 1, 2, 2])
    with pytest.raises(UsageError, match="static"):
        as_resize(NodeCall("Upsample", "u", {}, 9, consts=(None, None)))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


_NUMPY = recurrent.RecurrentKernels(
    transpose=np.transpose,
    activations={"Sigmoid": _sigmoid, "Tanh": np.tanh, "Relu": lambda x: np.maximum(x, 0)},
    stack=lambda xs, axis: np.stack(xs, axis),
    zeros_like=np.zeros_like,
    clip=np.clip,
)
_RNN = [t.name for t in load_tests() if t.name.startswith(("test_lstm", "test_gru"))]


@pytest.mark.parametrize("name", _RNN)
def test_recurrence_matches_onnx_test_data(name: str) -> None:
    test = _backend(name)
    node = test.model.graph.node[0]
    fn = recurrent.lstm if node.op_type == "LSTM" else recurrent.gru
    results = fn(_call(name), _NUMPY, *test.inputs)
    produced = [r for r, out in zip(results, node.output, strict=False) if out]
    assert len(produced) == len(test.outputs)
    for out, ref in zip(produced, test.outputs, strict=True):
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_recurrence_refuses_what_it_does_not_translate() -> None:
    x, w, r = np.zeros((3, 1, 2)), np.zeros((1, 12, 2)), np.zeros((1, 12, 3))
    lens = np.array([2], np.int32)
    short = NodeCall("LSTM", "l", {"hidden_size": 3}, 14, consts=(x, w, r, None, lens))
    with pytest.raises(NotImplementedError, match="sequence_lens"):
        recurrent.lstm(short, _NUMPY, x, w, r, None, lens)
    elu = NodeCall("LSTM", "l", {"activations": ["Elu", "Tanh", "Tanh"]}, 14)
    with pytest.raises(NotImplementedError, match="Elu"):
        recurrent.lstm(elu, _NUMPY, x, w, r)


# --- ConvTranspose windows the libraries' kernels do not take, in every library ----------

_FALLBACKS = {  # attrs, x shape, w shape: an odd crop; an output padding (onnxruntime and
    # torch refuse it, the spec does not) no library kernel takes directly
    "output_shape_odd_crop": ({"strides": [2, 2], "output_shape": [6, 7]}, (1, 2, 3, 3),
                              (2, 3, 3, 3)),
    "output_shape_grows": ({"strides": [2, 2], "output_shape": [8, 9]}, (1, 2, 3, 3),
                           (2, 3, 3, 3)),
    "outpad_not_below_stride": ({"strides": [2, 2], "output_padding": [2, 0]}, (1, 2, 4, 4),
                                (2, 3, 3, 3)),
}  # fmt: skip

_SCRIPT = """
import sys, numpy as np, onnx
from conformance.suite import _to_onnx_layout, make_library_adapter
from anpred.translate.graph import GraphProgram
adapter = make_library_adapter(sys.argv[1])
data = np.load(sys.argv[2])
program = GraphProgram(onnx.load(sys.argv[3]), adapter)
value = program.run({"x": data["x"]})["y"]
np.save(sys.argv[4], np.asarray(_to_onnx_layout(adapter, value)))
"""


def _fallback_model(attrs: dict, w: np.ndarray, b: np.ndarray):  # type: ignore[no-untyped-def]
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", 1, None)],
        [helper.make_tensor_value_info("y", 1, None)],
        [helper.make_tensor("w", 1, w.shape, w.ravel()), helper.make_tensor("b", 1, b.shape, b)],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _fallback_expected(attrs: dict, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    plain = {"strides": attrs["strides"]}
    (full,) = evaluate(_fallback_model(plain, w, np.zeros_like(b)), {"x": x})
    call = NodeCall("ConvTranspose", "n", attrs, 17)
    win = transposed_window(call, list(x.shape[2:]), list(w.shape[2:]))
    out = np.zeros((*full.shape[:2], *win.out), full.dtype)
    for i in range(win.out[0]):
        for j in range(win.out[1]):
            si, sj = i + win.begin[0], j + win.begin[1]
            if 0 <= si < full.shape[2] and 0 <= sj < full.shape[3]:
                out[:, :, i, j] = full[:, :, si, sj]
    return out + b.reshape(1, -1, 1, 1)


@pytest.mark.slow
@pytest.mark.parametrize("library", ["torch", "tensorflow", "jax", "paddle"])
def test_conv_transpose_windows_beyond_the_kernels(library: str, tmp_path: Path) -> None:
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed")
    env = dict(os.environ, HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"),
               JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")  # fmt: skip
    # the script imports the test-only conformance package (tests/translate/conformance)
    here = str(Path(__file__).resolve().parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    rng = np.random.default_rng(0)
    for case, (attrs, x_shape, w_shape) in _FALLBACKS.items():
        x = rng.standard_normal(x_shape).astype(np.float32)
        w = rng.standard_normal(w_shape).astype(np.float32)
        b = rng.standard_normal(w_shape[1]).astype(np.float32)
        import onnx

        onnx.save(_fallback_model(attrs, w, b), tmp_path / "m.onnx")
        np.savez(tmp_path / "x.npz", x=x)
        proc = subprocess.run(
            [sys.executable, "-c", _SCRIPT, library, str(tmp_path / "x.npz"),
             str(tmp_path / "m.onnx"), str(tmp_path / "y.npy")],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        actual = np.load(tmp_path / "y.npy")
        # float32 sums of at most 2x2x2 products of N(0,1) values: 1e-5 is ~100 ulp of them
        np.testing.assert_allclose(actual, _fallback_expected(attrs, x, w, b), rtol=1e-5,
                                   atol=1e-5, err_msg=f"{library} {case}")  # fmt: skip
