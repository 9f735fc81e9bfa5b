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
from onnx import TensorProto, helper, numpy_helper

from anpred.errors import UsageError
from anpred.inject import FaultSpec
from anpred.inject.onnx_rewrite import OnnxFaultMath, rewrite_model

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


#: Opsets the rewrite is checked at: the corpus's oldest (9: no ``Round``, no
#: ``GreaterOrEqual``, ``Clip`` bounds as attributes), 11 (no bfloat16 ``Cast``) and a new one.
OPSETS = [9, 11, 17]


def _graph(build: Any, emulate: bool, n: int, opset: int = 17) -> onnx.ModelProto:
    math = OnnxFaultMath("fault", {"x"}, emulate_casts=emulate, opset=opset)
    result = build(math, "x")
    graph = helper.make_graph(
        [*math.nodes, helper.make_node("Identity", [result], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
        initializer=math.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    # every node exists, with these types, at the graph's opset
    onnx.checker.check_model(model, full_check=True)
    return model


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


def _emulated(case: str, emulate_casts: bool, opset: int = 17) -> bool:
    """Whether the range limit applies (float16's emulation is exact for every value;
    bfloat16 is emulated below opset 13, where ``Cast`` has no bfloat16).
    """
    bf16_emulated = emulate_casts or opset < 13
    return case.startswith("mantissa") or (bf16_emulated and case == "bf16")


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("emulate", [False, True], ids=["casts", "emulated"])
def test_onnxruntime_computes_each_operation_exactly(case: str, emulate: bool, opset: int) -> None:
    build, reference = CASES[case]
    x = values()
    got = _onnxruntime(_graph(build, emulate, x.size, opset), x)
    _check(got, reference(x), x, _emulated(case, emulate, opset))


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("case", list(CASES))
def test_openvino_computes_each_emulated_operation_exactly(case: str, opset: int) -> None:
    build, reference = CASES[case]
    x = values()
    got = _openvino(_graph(build, True, x.size, opset), x)
    _check(got, reference(x), x, _emulated(case, True, opset))


def test_casts_are_used_where_the_opset_has_them() -> None:
    """float16 ``Cast`` exists from opset 6, bfloat16 from 13 (emulated below)."""
    for opset, bf16_cast in ((9, False), (11, False), (12, False), (13, True), (17, True)):
        math = OnnxFaultMath("f", {"x"}, emulate_casts=False, opset=opset)
        assert math.casts_to("float16")
        assert math.casts_to("bfloat16") is bf16_cast
        math.round_trip("x", "bfloat16")
        assert ("Cast" in {n.op_type for n in math.nodes}) is bf16_cast
    assert not OnnxFaultMath("f", {"x"}, emulate_casts=True, opset=17).casts_to("float16")
    with pytest.raises(UsageError, match="opset 9 or newer"):
        OnnxFaultMath("f", {"x"}, emulate_casts=False, opset=8)


@pytest.mark.parametrize("opset", OPSETS)
def test_lookup_table_matches_its_definition_at_every_opset(opset: int) -> None:
    """``Clip`` takes its bounds as attributes before opset 11."""
    start, step = -4.0, 0.5
    table = np.linspace(0.0, 1.0, 16, dtype=np.float32)
    slopes = np.full(16, 0.25, np.float32)
    x = np.linspace(-6.0, 6.0, 97, dtype=np.float32)
    got = _onnxruntime(
        _graph(lambda m, v: m.lookup_linear(v, start, step, table, slopes), False, x.size, opset),
        x,
    )
    t = (np.clip(x, start, start + 16 * step) - start) / step
    i = np.minimum(np.floor(t), 15).astype(np.int64)
    np.testing.assert_allclose(got, table[i] + (t - i) * slopes[i], rtol=1e-6, atol=1e-7)


def _conv_relu(opset: int) -> onnx.ModelProto:
    """A tiny Conv → Relu graph at ``opset``, as a user's old export would be."""
    rng = np.random.default_rng(1)
    weight = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], name="/s1/Conv", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["y"], name="/s1/Relu"),
        ],
        "conv_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        initializer=[weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 4 if opset <= 9 else 6
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("opset", [9, 11])
@pytest.mark.parametrize("kind", ["bf16", "fp16"])
@pytest.mark.parametrize("emulate", [False, True], ids=["casts", "emulated"])
def test_rewritten_old_opset_graph_is_valid_and_faults_the_node(
    opset: int, kind: str, emulate: bool
) -> None:
    """A bf16 fault on an opset-9/11 graph used to insert an invalid bfloat16 ``Cast``."""
    model = _conv_relu(opset)
    faulty = rewrite_model(model, FaultSpec("s1", "Conv", kind, 1), ["/s1/Conv"], emulate)
    onnx.checker.check_model(faulty, full_check=True)
    assert faulty.opset_import[0].version == opset
    casts = [n.attribute[0].i for n in faulty.graph.node if n.op_type == "Cast"]
    if kind == "fp16" and not emulate:
        assert casts == [TensorProto.FLOAT16, TensorProto.FLOAT]
    else:
        assert TensorProto.BFLOAT16 not in casts
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    clean = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    session = ort.InferenceSession(faulty.SerializeToString(), providers=["CPUExecutionProvider"])
    conv = _onnxruntime_conv(model, x)
    reference = bf16_reference if kind == "bf16" else fp16_reference
    expected = np.maximum(reference(conv), 0.0)
    got = session.run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, expected)
    assert not np.array_equal(got, clean.run(None, {"x": x})[0])


def _onnxruntime_conv(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """The Conv's own output (the graph cut before Relu)."""
    cut = onnx.ModelProto()
    cut.CopyFrom(model)
    del cut.graph.node[1:]
    del cut.graph.output[:]
    cut.graph.output.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 4, 8, 8]))
    session = ort.InferenceSession(cut.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _openvino_has_bf16() -> bool:
    """Whether OpenVINO's CPU plugin computes in bfloat16 on this CPU (AVX512-BF16/AMX)."""
    ov = pytest.importorskip("openvino")
    return "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def test_openvino_cast_pairs_depend_on_the_cpu_which_is_why_casts_are_emulated() -> None:
    """OpenVINO 2026.4 with an f32 precision hint computes a Convert f32→bf16→f32 pair one of
    two ways, depending on the CPU: it optimizes the pair away (identity), or it really
    rounds to bfloat16. Which one is not told by the plugin's ``BF16`` capability: measured,
    a CPU without AVX512-BF16 and without the capability optimized it away on one machine,
    and another (a Xeon with AVX512F, no AVX512-BF16, no ``BF16`` capability) rounded. A fault
    written as a Cast pair would then depend on the machine, which is why the OpenVINO
    faults are emulated in f32 arithmetic (exact on every CPU, tested above).
    """
    x = values()[:4000]
    got = _openvino(_graph(CASES["bf16"][0], False, x.size), x)
    finite = np.isfinite(x)
    rounded = np.array_equal(got[finite], bf16_reference(x)[finite])
    identity = np.array_equal(got, x, equal_nan=True)
    assert rounded != identity  # exactly one of the two behaviours, never something else
    if _openvino_has_bf16():  # with bf16 arithmetic the plugin always rounds
        assert rounded
