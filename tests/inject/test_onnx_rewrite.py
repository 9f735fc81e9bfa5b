"""The ONNX fault operations match their definitions bit for bit in onnxruntime and OpenVINO.

The reference of each operation is numpy on the float32 bit patterns: bfloat16 rounding to
nearest even, numpy's float16 cast, and masking the fraction bits. The values include
zeros, subnormals, float16's overflow threshold, rounding ties and infinities. The
arithmetic emulations of mantissa truncation and of the bfloat16 round trip (OpenVINO) are
exact for ``2**-100 <= |x| <= 2**100`` and leave other values unchanged, by design;
the float16 emulation is exact everywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from fault_reference import bf16_reference, fp16_reference, truncate_reference
from onnx import TensorProto, helper

from anpred.inject.onnx_rewrite import OnnxFaultMath

ort = pytest.importorskip("onnxruntime")


def values() -> np.ndarray:
    rng = np.random.default_rng(0)
    spread = rng.standard_normal(4000) * np.exp2(rng.uniform(-40, 40, 4000))
    f32 = np.float32
    special = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.0**-126,
        2.0**-130,
        -(2.0**-149),
        3 * 2.0**-140,
        65504.0,
        65519.0,
        65520.0,
        -65520.0,
        65536.0,
        1e5,
        1e30,
        -1e30,
        2.0**100,
        1 + 2.0**-8,
        1 + 3 * 2.0**-8,
        -(1 + 2.0**-8),  # bfloat16 ties
        1 + 2.0**-11,
        1 + 3 * 2.0**-11,  # float16 ties
        2.0**-25,
        3 * 2.0**-25,
        2.0**-14 - 2.0**-24,
        2.0**-14 - 2.0**-26,
        6e-8,
        np.inf,
        -np.inf,
        np.nan,
    ]
    return np.concatenate([spread, special]).astype(f32)


def _graph(build: Any, emulate: bool, n: int) -> onnx.ModelProto:
    math = OnnxFaultMath("fault", {"x"}, emulate_casts=emulate)
    result = build(math, "x")
    graph = helper.make_graph(
        [*math.nodes, helper.make_node("Identity", [result], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
        initializer=math.initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _onnxruntime(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"x": x})[0]


def _openvino(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    ov = pytest.importorskip("openvino")
    core = ov.Core()
    compiled = core.compile_model(
        core.read_model(model.SerializeToString(), b""), "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
    )
    return np.array(next(iter(compiled({"x": x}).values())))


CASES = {
    "bf16": (lambda m, x: m.round_trip(x, "bfloat16"), bf16_reference),
    "fp16": (lambda m, x: m.round_trip(x, "float16"), fp16_reference),
    "mantissa0": (lambda m, x: m.truncate_mantissa(x, 0), lambda x: truncate_reference(x, 0)),
    "mantissa7": (lambda m, x: m.truncate_mantissa(x, 7), lambda x: truncate_reference(x, 7)),
    "mantissa22": (lambda m, x: m.truncate_mantissa(x, 22), lambda x: truncate_reference(x, 22)),
}


def _check(got: np.ndarray, expected: np.ndarray, x: np.ndarray, emulated: bool) -> None:
    """Exact where the operation is defined to be; elsewhere the value passes unchanged."""
    magnitude = np.abs(x)
    inside = (magnitude >= 2.0**-100) & (magnitude <= 2.0**100) | (x == 0)
    exact = inside if emulated else np.ones(x.shape, bool)
    np.testing.assert_array_equal(got[exact & ~np.isinf(x)], expected[exact & ~np.isinf(x)])
    assert np.array_equal(got[np.isinf(x)], x[np.isinf(x)])
    assert np.isnan(got[np.isnan(x)]).all()
    passing = ~exact & np.isfinite(x)
    np.testing.assert_array_equal(got[passing], x[passing])


def _emulated(case: str, emulate_casts: bool) -> bool:
    """Whether the range limit applies (float16's emulation is exact for every value)."""
    return case.startswith("mantissa") or (emulate_casts and case == "bf16")


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("emulate", [False, True], ids=["casts", "emulated"])
def test_onnxruntime_computes_each_operation_exactly(case: str, emulate: bool) -> None:
    build, reference = CASES[case]
    x = values()
    got = _onnxruntime(_graph(build, emulate, x.size), x)
    _check(got, reference(x), x, _emulated(case, emulate))


@pytest.mark.parametrize("case", list(CASES))
def test_openvino_computes_each_emulated_operation_exactly(case: str) -> None:
    build, reference = CASES[case]
    x = values()
    got = _openvino(_graph(build, True, x.size), x)
    _check(got, reference(x), x, _emulated(case, True))


def _openvino_has_bf16() -> bool:
    """Whether OpenVINO's CPU plugin computes in bfloat16 on this CPU (AVX512-BF16/AMX)."""
    ov = pytest.importorskip("openvino")
    return "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def test_openvino_cast_pairs_depend_on_the_cpu_which_is_why_casts_are_emulated() -> None:
    """OpenVINO 2026.4 with an f32 precision hint: on a CPU without bf16 support it
    optimizes a Convert f32→bf16→f32 pair away; on one with AVX512-BF16/AMX it really
    rounds. A fault written as a Cast pair would then depend on the machine, which is why
    the OpenVINO faults are emulated in f32 arithmetic (exact on both, tested above).
    """
    x = values()[:4000]
    got = _openvino(_graph(CASES["bf16"][0], False, x.size), x)
    finite = np.isfinite(x)
    if _openvino_has_bf16():
        np.testing.assert_array_equal(got[finite], bf16_reference(x)[finite])
        assert not np.array_equal(got[finite], x[finite])
    else:
        assert np.array_equal(got, x, equal_nan=True)
