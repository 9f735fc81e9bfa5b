"""Partial faults (``FaultSpec.partial``): only the selected elements take the faulty value.

The spec part needs no DL library. The chain part runs each library in its own subprocess
(``fault_runs.py``, as ``test_fault_kinds.py`` does) with the partial faults below, and
checks on the faulted anchor, in anchored inference and in stage isolation, that

* the elements outside the selection are bit-identical to the clean run;
* the elements inside it are the whole-tensor fault's value (bit-exact for the elementwise
  roundings, computed in numpy from the clean anchor), and the selection is partial;
* the other anchors behave as for a whole-tensor fault (earlier ones, and isolated later
  ones, untouched);
* the transform's record (the worker's ground truth) carries the partial and the label
  its suffix.

Selections: ``above:K`` = ``|y| > K·sqrt(mean(y²))`` on the clean tensor ``y``;
``channels:F`` = the first ``ceil(F·C)`` indices of ONNX axis 1. Each library computes the
RMS in float32 in its own summation order, so elements within :data:`RMS_TOL` of the
threshold may fall on either side; they must still be either the clean or the faulty value.
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fault_chain import ANCHORS
from fault_reference import (
    bf16_reference,
    fp16_reference,
    s2_conv_reference,
    truncate_reference,
)
from fault_runs import LibraryRun, library_params, run_library
from partial_math_check import CASES as MATH_CASES

from anpred.errors import UsageError
from anpred.inject import FaultSpec
from anpred.inject.kinds import activation_table
from anpred.inject.spec import parse_partial

ORDER = list(ANCHORS)

#: name → partial fault.
CASES: dict[str, dict[str, Any]] = {
    "mantissa_above": {
        "stage": "s2",
        "op": "Conv",
        "kind": "mantissa",
        "severity": 7,
        "partial": "above:1.5",
    },
    "bf16_above": {
        "stage": "s2",
        "op": "Conv",
        "kind": "bf16",
        "severity": 1,
        "partial": "above:2",
    },
    "fp16_channels": {
        "stage": "s2",
        "op": "Conv",
        "kind": "fp16",
        "severity": 1,
        "partial": "channels:0.25",
    },
    # s4 is [1, 16, 16, 8] in ONNX (the LayerNorm runs on NHWC data): axis 1 is the 16
    # rows, so ceil(0.3·16) = 5 rows are faulted, in every library's own storage layout.
    "mantissa_channels_s4": {
        "stage": "s4",
        "op": "LayerNormalization",
        "kind": "mantissa",
        "severity": 7,
        "partial": "channels:0.3",
    },
    "lowp_above": {
        "stage": "s2",
        "op": "Conv",
        "kind": "lowp_accum",
        "severity": 1,
        "partial": "above:1",
    },
    "approx_above": {
        "stage": "s3",
        "op": "Sigmoid",
        "kind": "approx_act",
        "severity": 0.5,
        "partial": "above:1",
    },
}
#: Relative band around the ``above`` threshold where either side is accepted: the float32
#: mean of n = 2048 squares is within n·2**-24 ≈ 1.2e-4 of the exact one even when summed
#: naively (sqrt halves it); measured differences between the libraries are far smaller.
RMS_TOL = 1.2e-4
#: Whole-tensor references of the elementwise kinds (numpy, on float32 bit patterns).
ELEMENTWISE = {
    "mantissa_above": lambda y: truncate_reference(y, 7),
    "bf16_above": bf16_reference,
    "fp16_channels": fp16_reference,
    "mantissa_channels_s4": lambda y: truncate_reference(y, 7),
}


#: numpy rounding to each reduced format (a value already in the format is unchanged).
REDUCED = {"bfloat16": bf16_reference, "float16": fp16_reference}


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _selection(partial: str, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(must be faulty, must be clean) masks of ``y`` for a partial string."""
    mode, _, number = partial.partition(":")
    if mode == "above":
        threshold = float(number) * np.sqrt(np.mean(y.astype(np.float64) ** 2))
        magnitude = np.abs(y.astype(np.float64))
        return magnitude > threshold * (1 + RMS_TOL), magnitude < threshold * (1 - RMS_TOL)
    count = math.ceil(Fraction(number) * y.shape[1])
    index = np.arange(y.shape[1]).reshape((1, -1) + (1,) * (y.ndim - 2))
    inside = np.broadcast_to(index < count, y.shape)
    return inside, ~inside


def _check_elementwise(name: str, clean: np.ndarray, got: np.ndarray) -> None:
    full = ELEMENTWISE[name](clean)
    faulty, untouched = _selection(CASES[name]["partial"], clean)
    np.testing.assert_array_equal(got[untouched], clean[untouched])
    np.testing.assert_array_equal(got[faulty], full[faulty])
    assert ((got == clean) | (got == full)).all()  # the band: one or the other
    assert untouched.mean() > 0.5 and (full != clean)[faulty].any()  # really partial


def _check_lowp(clean_s1: np.ndarray, got: np.ndarray) -> None:
    def partial_fp16(a: np.ndarray) -> np.ndarray:
        rms = np.sqrt(np.mean(a.astype(np.float64) ** 2))
        return np.where(np.abs(a) > rms, fp16_reference(a), a)

    expected = s2_conv_reference(clean_s1, partial_fp16)
    whole = s2_conv_reference(clean_s1, fp16_reference)
    exact = s2_conv_reference(clean_s1, lambda a: a)
    # float32 noise of recomputing the conv (measured ≤ 1.2e-7, test_fault_kinds) against
    # the partial fault (~1e-4) and what separates it from the whole-tensor one (~1e-4)
    assert _rel(got, expected) < 1e-6 < 1e-5 < min(_rel(got, exact), _rel(got, whole))


def _check_approx(clean_s2: np.ndarray, clean_s3: np.ndarray, got: np.ndarray) -> None:
    start, values, slopes = activation_table("Sigmoid", 0.5)
    t = (np.clip(clean_s2, start, start + len(values) * 0.5) - start) * np.float32(2)
    i = np.minimum(np.floor(t), len(values) - 1)
    table = values[i.astype(int)] + (t - i) * slopes[i.astype(int)]
    sigmoid = 1 / (1 + np.exp(-clean_s2.astype(np.float64)))
    faulty, untouched = _selection("above:1", sigmoid)
    # untouched elements: the activation recomputed in the faulted graph; TensorFlow's Sigmoid
    # (oneDNN, AVX-512 Xeon) differed from the clean graph's by up to 4.6e-7 relative (a few
    # float32 ulps) there, so "unchanged" is within 1e-6 relative, not bit for bit
    np.testing.assert_allclose(got[untouched], clean_s3[untouched], rtol=1e-6, atol=0)
    expected = clean_s2 * table
    atol = 1e-6 * np.abs(clean_s2).max()  # as test_fault_kinds: the Mul's float32 rounding
    np.testing.assert_allclose(got[faulty], expected[faulty], rtol=0, atol=atol)
    assert untouched.any() and not np.array_equal(got[faulty], clean_s3[faulty])


@pytest.fixture(scope="module", params=library_params())
def library_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, LibraryRun]:
    library = request.param
    return library, run_library(library, CASES, tmp_path_factory.mktemp(f"partial-{library}"))


@pytest.mark.parametrize("name", list(CASES))
def test_a_partial_fault_changes_only_its_selection(
    library_run: tuple[str, LibraryRun], name: str
) -> None:
    library, run = library_run
    result = run.results[name]
    assert "error" not in result, result.get("error")
    clean, faulty = run.arrays("clean"), run.arrays(name)
    stage = CASES[name]["stage"]
    index = ORDER.index(stage)
    for key in ORDER[:index]:
        assert np.array_equal(faulty[f"infer/{key}"], clean[f"infer/{key}"]), key
    for key in ORDER:
        same = np.array_equal(faulty[f"isolated/{key}"], clean[f"isolated/{key}"])
        assert same == (key != stage), f"isolated {key}"
    for prefix in ("infer", "isolated"):
        got = faulty[f"{prefix}/{stage}"]
        if name in ELEMENTWISE:
            _check_elementwise(name, clean[f"{prefix}/{stage}"], got)
        elif name == "lowp_above":
            _check_lowp(clean[f"{prefix}/s1"], got)
        else:
            _check_approx(clean[f"{prefix}/s2"], clean[f"{prefix}/s3"], got)
    record = result["fault"]
    assert record["partial"] == CASES[name]["partial"]
    suffix = CASES[name]["partial"].replace(":", "")
    assert record["label"] == f"{CASES[name]['kind']}@{stage}~{suffix}"


def test_the_clean_participant_is_untouched(library_run: tuple[str, LibraryRun]) -> None:
    _, run = library_run
    before, after = run.arrays("clean"), run.arrays("clean_after")
    assert before.keys() == after.keys()
    for key in before:
        assert np.array_equal(before[key], after[key]), key


# -- the spec (no DL library) ------------------------------------------------------------


def test_a_partial_spec_round_trips_and_whole_faults_read_as_before() -> None:
    data = {"stage": "s2", "op": "*", "kind": "mantissa", "severity": 10, "partial": "above:2"}
    spec = FaultSpec.from_dict(data)
    assert spec.partial == "above:2" and spec.to_dict() == data
    assert FaultSpec.from_dict(spec.to_dict()) == spec
    assert spec.label == "mantissa@s2~above2"
    whole = FaultSpec.from_dict({k: v for k, v in data.items() if k != "partial"})
    assert "partial" not in whole.to_dict() and whole.label == "mantissa@s2"
    channels = FaultSpec.from_dict({**data, "partial": "channels:0.250"})
    assert channels.partial == "channels:0.25" and channels.label == "mantissa@s2~channels0.25"
    assert FaultSpec.from_dict({**data, "partial": "above:2.0"}).partial == "above:2"


def test_the_channel_count_reads_the_fraction_as_written() -> None:
    assert parse_partial("channels:0.3").channel_count(10) == 3  # 0.3*10 is 3.0000000000000004
    assert parse_partial("channels:0.25").channel_count(8) == 2
    assert parse_partial("channels:0.01").channel_count(8) == 1
    assert parse_partial("channels:0.99").channel_count(8) == 8


@pytest.mark.parametrize(
    ("kind", "partial", "message"),
    [
        ("bf16", "above", "write above:K"),
        ("bf16", "above:0", "write above:K"),
        ("bf16", "above:-1", "write above:K"),
        ("bf16", "above:inf", "write above:K"),
        ("bf16", "above:x", "write above:K"),
        ("bf16", "channels:0", "write above:K"),
        ("bf16", "channels:1", "write above:K"),
        ("bf16", "half", "write above:K"),
        ("bf16", "", "write above:K"),
        ("eps", "above:2", "changes a node attribute; it cannot be partial"),
        ("lowp_accum", "channels:0.5", "only above:K applies to them"),
    ],
)
def test_bad_partials_are_one_line_usage_errors(kind: str, partial: str, message: str) -> None:
    op = {"eps": "BatchNormalization", "lowp_accum": "Conv"}.get(kind, "*")
    with pytest.raises(UsageError, match=message) as caught:
        FaultSpec.from_dict({"stage": "s2", "op": op, "kind": kind, "partial": partial})
    assert "\n" not in str(caught.value)


# -- FaultMath on float32, bfloat16, float16 and NHWC-stored values ----------------------

#: Libraries whose FaultMath is checked directly (each in its own subprocess).
MATH_LIBRARIES = [
    "torch",
    *(pytest.param(lib, marks=pytest.mark.slow) for lib in ("jax", "tensorflow", "paddle")),
]


@pytest.fixture(scope="module", params=MATH_LIBRARIES)
def math_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, np.ndarray]:
    library = request.param
    if importlib.util.find_spec(library) is None:  # never imported here
        pytest.skip(f"{library} is not installed")
    out = tmp_path_factory.mktemp(f"partial-math-{library}") / "out.npz"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "partial_math_check.py"), library, str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(out) as data:
        return {key: data[key] for key in data.files}


@pytest.mark.parametrize("case", list(MATH_CASES))
def test_partial_faults_keep_reduced_precision_and_layout(
    math_run: dict[str, np.ndarray], case: str
) -> None:
    dtype, layout, fault = MATH_CASES[case]
    if f"{case}/clean" not in math_run:
        pytest.skip(f"{layout}-stored values exist in TensorFlow only")
    clean, got = math_run[f"{case}/clean"], math_run[f"{case}/faulty"]
    if dtype != "float32":  # the clean tensor really is in the reduced format
        assert np.array_equal(clean, REDUCED[dtype](clean))
        assert np.array_equal(got, REDUCED[dtype](got))
    faulty, untouched = _selection(fault["partial"], clean)
    assert untouched.any() and faulty.any()
    np.testing.assert_array_equal(got[untouched], clean[untouched])
    if fault["kind"] == "mantissa":
        full = truncate_reference(clean, 3)
        np.testing.assert_array_equal(got[faulty], full[faulty])
        assert ((got == clean) | (got == full)).all()
        assert (full != clean)[faulty].mean() > 0.5
    else:  # the table's value rounded to bfloat16: one bfloat16 ulp for fma or not
        start, values, slopes = activation_table("Sigmoid", 0.5)
        x = math_run[f"{case}/input"]
        t = (np.clip(x, start, start + len(values) * 0.5) - start) * np.float32(2)
        i = np.minimum(np.floor(t), len(values) - 1)
        table = bf16_reference(values[i.astype(int)] + (t - i) * slopes[i.astype(int)])
        np.testing.assert_allclose(got[faulty], table[faulty], rtol=2.0**-7, atol=0)
        assert (got[faulty] == table[faulty]).mean() > 0.9
        assert not np.array_equal(got[faulty], clean[faulty])


# -- the ONNX rewriter's selection at old and new opsets ----------------------------------


@pytest.mark.parametrize("opset", [9, 11, 17, 18])
@pytest.mark.parametrize("partial", ["above:1.5", "channels:0.5"])
def test_onnx_selection_is_valid_and_exact_at_every_opset(opset: int, partial: str) -> None:
    ort = pytest.importorskip("onnxruntime")
    import onnx
    from onnx import TensorProto, helper

    from anpred.inject.onnx_rewrite import OnnxFaultMath
    from anpred.inject.spec import fault_kind

    shape = (2, 6, 5, 4)
    spec = FaultSpec.from_dict({"stage": "s", "op": "*", "kind": "mantissa", "severity": 3})
    spec = FaultSpec.from_dict({**spec.to_dict(), "partial": partial})
    math_ = OnnxFaultMath("fault", {"x"}, emulate_casts=False, opset=opset, shapes={"x": shape})
    (result,) = fault_kind("mantissa").outputs(math_, spec, "Conv", [], ["x"])
    graph = helper.make_graph(
        [*math_.nodes, helper.make_node("Identity", [result], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
        initializer=math_.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)  # every node exists at this opset
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = (np.random.default_rng(3).standard_normal(shape) * 3).astype(np.float32)
    got = session.run(None, {"x": x})[0]
    faulty, untouched = _selection(partial, x)
    np.testing.assert_array_equal(got[untouched], x[untouched])
    np.testing.assert_array_equal(got[faulty], truncate_reference(x, 3)[faulty])
    assert faulty.any() and untouched.any()
