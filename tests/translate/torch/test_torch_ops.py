"""Torch translators, op by op, in float64 against the float64 ONNX reference (torch only).

In float64 the torch translation is the reference of user ONNX files, so it must agree
with the ONNX reference evaluator to float64 rounding: over the whole catalogue the largest
deviation measured is 6.4e-16 (MatMul/long_reduction); FP64_TOLERANCE leaves a margin of
about 150x. The only larger differences come from constants the ONNX side holds in float32
while torch's kernels use the exact value: HardSwish's function body and the exported
HardSigmoid alpha are float32(1/6) (measured 9e-9 and 1.5e-8); a float32 constant is off by
at most half a float32 epsilon, relative.

Float32 accuracy is judged by the conformance suite (tests/translate/test_conformance.py).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
import torch
from conformance.cases import (
    OpCase,
    all_cases,
    build_model,
    case_feeds,
    output_names,
)
from conformance.suite import deviation, evaluate, measure_reference, tolerance
from onnx import helper

from anpred.errors import MissingTranslatorError, UsageError
from anpred.translate.graph import GraphProgram
from anpred.translate.torch import make_adapter
from anpred.translate.torch.adapter import float_dtype

FP64_TOLERANCE = 1e-13
FLOAT32_CONSTANT_TOLERANCE = float(np.finfo(np.float32).eps)
_FLOAT32_CONSTANTS = {"HardSwish/nchw", "HardSwish/vector", "HardSwish/tokens",
                      "HardSigmoid/torch_alpha"}  # fmt: skip
#: Cases where the evaluator itself rounds to float32: it computes cubic weights with its
#: float32 ``cubic_coeff_a`` attribute and tf_crop_and_resize coordinates with the float32
#: roi. Measured up to 4.1e-7 (max-abs relative); the evaluator with A as a float64 agrees
#: with the taps exactly (cubic_asymmetric: 2.9e-7 -> 0). Bound: 4 float32 epsilons.
EVALUATOR_FLOAT32_TOLERANCE = 4 * float(np.finfo(np.float32).eps)
_EVALUATOR_FLOAT32 = {"Resize/cubic_a_n0p5_exclude_outside", "Resize/cubic_asymmetric",
                      "Resize/linear_tf_crop_and_resize",
                      "Resize/linear_tf_crop_extrapolate"}  # fmt: skip

_EVALUATOR_CASES = [c for c in all_cases() if c.reference == "onnx"]


def _run(case: OpCase, settings: dict | None, dtype: type) -> list[np.ndarray]:
    adapter = make_adapter(settings)
    program = GraphProgram(build_model(case, dtype), adapter)
    values = program.run(case_feeds(case, dtype))
    assert all(adapter.layout(values[n]) == "NCHW" for n in output_names(case))
    return [adapter.to_numpy(values[name]) for name in output_names(case)]


@pytest.mark.parametrize("case", _EVALUATOR_CASES, ids=lambda c: c.key)
def test_float64_translation_matches_float64_reference(case: OpCase) -> None:
    expected = evaluate(build_model(case, np.float64), case_feeds(case, np.float64))
    actual = _run(case, {"dtype": "float64"}, np.float64)
    limit = FLOAT32_CONSTANT_TOLERANCE if case.key in _FLOAT32_CONSTANTS else FP64_TOLERANCE
    if case.key in _EVALUATOR_FLOAT32:
        limit = EVALUATOR_FLOAT32_TOLERANCE
    for out, ref in zip(actual, expected, strict=True):
        assert out.shape == ref.shape
        assert out.dtype == (np.float64 if ref.dtype.kind == "f" else ref.dtype)
        dev = deviation(out, ref)
        assert dev.rel_l2 <= limit and dev.max_abs_rel <= limit, dev


@pytest.mark.parametrize("case", _EVALUATOR_CASES, ids=lambda c: c.key)
def test_float32_by_default_with_onnx_output_types(case: OpCase) -> None:
    expected = evaluate(build_model(case, np.float32), case_feeds(case, np.float32))
    actual = _run(case, None, np.float32)
    assert [o.dtype for o in actual] == [r.dtype for r in expected]
    assert [o.shape for o in actual] == [r.shape for r in expected]


def _single(op: str, case_id: str) -> OpCase:
    return next(c for c in all_cases([op]) if c.case_id == case_id)


# Cases whose reference is onnxruntime (the evaluator is wrong there) get NumPy references.


def test_softmax_before_opset13_normalises_the_flattened_tail() -> None:
    case = _single("Softmax", "opset11_flatten")
    x = case_feeds(case, np.float64)["in0"]
    flat = np.exp(x.reshape(2, 12) - x.reshape(2, 12).max(axis=1, keepdims=True))
    expected = (flat / flat.sum(axis=1, keepdims=True)).reshape(x.shape)
    (out,) = _run(case, {"dtype": "float64"}, np.float64)
    assert deviation(out, expected).max_abs_rel <= FP64_TOLERANCE


def test_max_pool_with_asymmetric_pads_pads_top_left_then_bottom_right() -> None:
    case = _single("MaxPool", "asym_pads_s1")  # pads [0, 0, 1, 1], kernel 2, stride 1
    x = case_feeds(case, np.float64)["in0"]
    padded = np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1)), constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (2, 2), axis=(2, 3))
    (out,) = _run(case, {"dtype": "float64"}, np.float64)
    assert np.array_equal(out, windows.max(axis=(-2, -1)))


def test_negative_pads_crop() -> None:
    case = _single("Pad", "crop")  # pads [0, -1, 1, 0, -2, 1] on (2, 6, 5)
    x = case_feeds(case, np.float64)["in0"]
    expected = np.pad(x[:, 1:4, :], ((0, 0), (0, 0), (1, 1)))
    (out,) = _run(case, {"dtype": "float64"}, np.float64)
    assert np.array_equal(out, expected)


# --- the adapter ------------------------------------------------------------------------


def _cast_model(to: int) -> onnx.ModelProto:
    node = helper.make_node("Cast", ["x"], ["y"], to=to)
    graph = helper.make_graph(
        [node], "cast", [helper.make_tensor_value_info("x", onnx.TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("y", to, [3])],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_float64_run_makes_float_casts_float64() -> None:
    model, x = _cast_model(onnx.TensorProto.FLOAT), {"x": np.array([1, 2, 3])}
    out64 = GraphProgram(model, make_adapter({"dtype": "float64"})).run(x)["y"]
    out32 = GraphProgram(model, make_adapter()).run(x)["y"]
    assert (out64.dtype, out32.dtype) == (torch.float64, torch.float32)
    assert float_dtype() == torch.float32  # the run's dtype does not leak out of the run


def test_adapter_settings_and_conversions() -> None:
    adapter = make_adapter({"dtype": "float64"})
    settings = adapter.settings()
    assert settings["dtype"] == "float64" and settings["compile"] is False
    assert settings["torch"] == torch.__version__
    assert adapter.const(np.ones(2, np.float32)).dtype == torch.float64
    assert adapter.feed(np.arange(3)).dtype == torch.int64
    assert adapter.feed(np.zeros(2, bool)).dtype == torch.bool
    half = adapter.cast(torch.tensor([1.0 / 3.0]), "bfloat16")
    assert half.dtype == torch.bfloat16
    assert adapter.to_numpy(half).dtype == np.float32
    assert adapter.to_numpy(half)[0] == pytest.approx(1.0 / 3.0, rel=2**-8)


@pytest.mark.parametrize("settings", [{"dtype": "float16"}, {"threads": 2}])
def test_adapter_rejects_unknown_settings(settings: dict) -> None:
    with pytest.raises(UsageError):
        make_adapter(settings)


def test_missing_translator_names_op_and_library() -> None:
    node = helper.make_node("NoSuchOp", ["x"], ["y"], domain="com.example")
    graph = helper.make_graph(
        [node], "custom", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    with pytest.raises(MissingTranslatorError, match="NoSuchOp.*torch"):
        GraphProgram(model, make_adapter())


def test_package_import_does_not_import_torch() -> None:
    code = "import sys, anpred.translate.torch; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_torch_compile_setting_stays_within_float32_tolerance() -> None:
    case = _single("Conv", "3x3_pad1_bias")
    reference = measure_reference(case, use_onnxruntime=False)
    (out,) = _run(case, {"compile": True}, np.float32)
    dev = deviation(out, reference.outputs[0])
    assert dev.rel_l2 <= tolerance(reference.noise[0].rel_l2)
