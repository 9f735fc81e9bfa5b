"""The op conformance suite: DL-free unit tests, then one subprocess run per library."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from conformance import suite as conf
from conformance.cases import (
    REQUIRED_OPS,
    all_cases,
    build_model,
    case_feeds,
    feed,
    input_names,
    make_case,
)
from conformance.suite import CaseReference, CaseStatus, Deviation

from anpred.translate.adapter import LibraryAdapter
from anpred.translate.registry import register

# --- the case builder -------------------------------------------------------------------


def test_catalogue_has_several_cases_for_every_required_op() -> None:
    counts = {op: 0 for op in REQUIRED_OPS}
    for case in all_cases():
        counts[case.op] = counts.get(case.op, 0) + 1
    assert {op: n for op, n in counts.items() if n < 2} == {}


def test_case_keys_are_unique() -> None:
    keys = [case.key for case in all_cases()]
    assert len(keys) == len(set(keys))


def test_cases_are_seeded_by_their_name() -> None:
    a = make_case("Relu", "x", [feed(3, 4)])
    b = make_case("Relu", "x", [feed(3, 4)])
    c = make_case("Relu", "y", [feed(3, 4)])
    assert np.array_equal(a.inputs[0].value, b.inputs[0].value)
    assert not np.array_equal(a.inputs[0].value, c.inputs[0].value)
    assert a.inputs[0].value.dtype == np.float32


def _tensors(model: onnx.ModelProto) -> dict[str, int]:
    types = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.input}
    types.update({init.name: init.data_type for init in model.graph.initializer})
    return types


def test_float64_copy_holds_the_float32_values_in_double() -> None:
    for case in all_cases():
        m32, m64 = build_model(case, np.float32), build_model(case, np.float64)
        t32, t64 = _tensors(m32), _tensors(m64)
        fixed = {n for n, i in zip(input_names(case), case.inputs, strict=True) if i.fixed_dtype}
        for name, elem in t32.items():
            if elem == onnx.TensorProto.FLOAT:
                expected = elem if name in fixed else onnx.TensorProto.DOUBLE  # Resize scales
                assert t64[name] == expected, case.key
            else:
                assert t64[name] == elem, case.key
        f32, f64 = case_feeds(case, np.float32), case_feeds(case, np.float64)
        for name, value in f32.items():
            assert np.array_equal(value.astype(f64[name].dtype), f64[name]), case.key
        assert len(m32.graph.output) == case.n_outputs
        assert all(o.type.tensor_type.elem_type for o in m32.graph.output), case.key


def test_float_type_attribute_follows_the_model_dtype() -> None:
    case = next(c for c in all_cases(["Cast"]) if c.case_id == "int64_to_float")
    to = {
        dtype: build_model(case, dtype).graph.node[0].attribute[0].i
        for dtype in (np.float32, np.float64)
    }
    assert to == {np.float32: onnx.TensorProto.FLOAT, np.float64: onnx.TensorProto.DOUBLE}


# --- deviations and the tolerance rule --------------------------------------------------


def test_deviation_metrics() -> None:
    dev = conf.deviation(np.array([3.0, 4.5]), np.array([3.0, 4.0]))
    assert dev.rel_l2 == pytest.approx(0.5 / 5.0)
    assert dev.max_abs_rel == pytest.approx(0.5 / 4.0)
    assert conf.deviation(np.zeros(3), np.zeros(3)) == Deviation(0.0, 0.0)
    assert conf.deviation(np.ones(3), np.zeros(3)) == Deviation(math.inf, math.inf)
    assert conf.deviation(np.array([np.nan]), np.array([1.0])) == Deviation(math.inf, math.inf)


def test_tolerance_is_factor_times_noise_with_an_epsilon_floor() -> None:
    eps32 = float(np.finfo(np.float32).eps)
    assert conf.NOISE_FLOOR == pytest.approx(conf.FLOOR_ULPS * eps32)
    assert conf.tolerance(0.0) == conf.NOISE_FLOOR
    assert conf.tolerance(1e-6) == pytest.approx(conf.TOLERANCE_FACTOR * 1e-6)
    noises = [0.0, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5]
    tolerances = [conf.tolerance(n) for n in noises]
    assert tolerances == sorted(tolerances)


def test_reference_noise_of_every_case_is_rounding_not_semantics() -> None:
    # Evaluator-only noise (no onnxruntime in this process); cases whose reference is
    # onnxruntime are measured in the per-library runs below.
    for case in all_cases():
        if case.reference != "onnx":
            continue
        ref = conf.measure_reference(case, use_onnxruntime=False)
        assert ref.notes == (), case.key
        for out, noise in zip(ref.outputs, ref.noise, strict=True):
            assert max(noise.rel_l2, noise.max_abs_rel) < conf.NOISE_CEILING, case.key
            if out.dtype.kind == "f":
                assert out.dtype == np.float64 or case.op == "ConstantOfShape", case.key


def test_evaluator_erf_is_float64_accurate() -> None:
    case = next(c for c in all_cases(["Erf"]) if c.case_id == "vector")
    (out,) = conf.evaluate(build_model(case, np.float64), case_feeds(case, np.float64))
    expected = np.array([math.erf(v) for v in case_feeds(case, np.float64)["in0"]])
    assert np.array_equal(out, expected)


# --- the runner, with a NumPy stand-in library ----------------------------------------


class _NumpyAdapter(LibraryAdapter):
    """A stand-in library; ``nhwc`` makes it keep 4-D tensors channels-last."""

    def __init__(self, name: str, nhwc: bool = False, report_nhwc: bool = True) -> None:
        self.name = name
        self.nhwc = nhwc
        self.report_nhwc = report_nhwc

    def const(self, array: np.ndarray) -> Any:
        return np.asarray(array)

    def feed(self, array: np.ndarray) -> Any:
        return np.transpose(array, (0, 2, 3, 1)) if self.nhwc and array.ndim == 4 else array

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def layout(self, value: Any) -> str:
        return "NHWC" if self.nhwc and self.report_nhwc and np.ndim(value) == 4 else "NCHW"


register("selftest-good", "Relu")(lambda call, x: np.maximum(x, 0))
register("selftest-nhwc", "Relu")(lambda call, x: np.maximum(x, 0))
register("selftest-wrong", "Relu")(lambda call, x: np.maximum(x, 0) * (1 + 1e-5))
register("selftest-raises", "Relu")(lambda call, x: 1 / 0)


@pytest.fixture(scope="module")
def relu_cases() -> tuple[list, dict[str, CaseReference]]:
    cases = all_cases(["Relu"])
    return cases, {c.key: conf.measure_reference(c, use_onnxruntime=False) for c in cases}


@pytest.mark.parametrize(
    ("adapter", "status"),
    [
        (_NumpyAdapter("selftest-good"), CaseStatus.PASSED),
        (_NumpyAdapter("selftest-nhwc", nhwc=True), CaseStatus.PASSED),
        (_NumpyAdapter("selftest-wrong"), CaseStatus.FAILED),
        (_NumpyAdapter("selftest-raises"), CaseStatus.ERROR),
        (_NumpyAdapter("selftest-none"), CaseStatus.MISSING),
    ],
    ids=["good", "nhwc", "wrong", "raises", "missing"],
)
def test_runner_judges_a_library(
    relu_cases: Any, adapter: LibraryAdapter, status: CaseStatus
) -> None:
    cases, references = relu_cases
    results = conf.run_cases(cases, adapter, references)
    assert [r.status for r in results] == [status] * len(cases)
    assert all(r.library == adapter.name and r.op == "Relu" for r in results)
    if status is CaseStatus.FAILED:
        assert all(r.rel_l2 > r.rel_l2_tol for r in results)
    if status is CaseStatus.MISSING:
        assert all("Relu" in r.message and "selftest-none" in r.message for r in results)


def test_runner_catches_an_unreported_layout(relu_cases: Any) -> None:
    cases, references = relu_cases
    adapter = _NumpyAdapter("selftest-nhwc", nhwc=True, report_nhwc=False)
    nchw = next(c for c in cases if c.case_id == "nchw")
    result = conf.check_case(nchw, adapter, references[nchw.key])
    assert result.status is CaseStatus.FAILED and "shape" in result.message


def test_suspect_reference_is_an_error_not_a_pass(relu_cases: Any) -> None:
    cases, references = relu_cases
    case = cases[0]
    ref = references[case.key]
    noisy = CaseReference(ref.outputs, (Deviation(0.5, 0.5),))
    result = conf.check_case(case, _NumpyAdapter("selftest-wrong"), noisy)
    assert result.status is CaseStatus.ERROR and "suspect" in result.message


def test_result_json_is_serialisable() -> None:
    result = conf.CaseResult("Relu", "x", "jax", CaseStatus.FAILED, math.inf, 1.0, 1e-6, 1e-6)
    record = json.loads(json.dumps(result.to_json()))
    assert record["status"] == "failed" and record["rel_l2"] == "inf"


def test_cli_rejects_unknown_ops() -> None:
    with pytest.raises(SystemExit) as exc:
        conf.main(["--library", "torch", "--ops", "Relu,NoSuchOp"])
    assert exc.value.code == 2


# --- every library, in its own process --------------------------------------------------

#: ``python -m conformance...`` runs with this folder (the suites' package) on its path.
_SUITES = os.pathsep.join(
    [str(Path(__file__).resolve().parent), *filter(None, [os.environ.get("PYTHONPATH")])]
)

_PACKAGES = {"torch": "torch", "tensorflow": "tensorflow", "jax": "jax", "paddle": "paddle"}

#: Cases a translator is known to get wrong or not to translate, none used by the zoo.
#: Listed (not skipped) so that the gap stays visible: the test fails when another case
#: fails, and when a listed case starts passing (then remove it here).
KNOWN_GAPS: set[tuple[str, str, str]] = set()


@pytest.mark.parametrize("library", conf.LIBRARIES)
def test_library_passes_every_case_or_reports_it_missing(library: str, tmp_path: Path) -> None:
    if importlib.util.find_spec(f"anpred.translate.{library}") is None:
        pytest.skip(f"anpred.translate.{library} does not exist yet")
    if importlib.util.find_spec(_PACKAGES[library]) is None:
        pytest.skip(f"{_PACKAGES[library]} is not installed")
    out = tmp_path / f"{library}.json"
    env = dict(os.environ, HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"),
               JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=_SUITES)  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.suite", "--library", library,
         "--json", str(out), "--allow-missing"],
        capture_output=True, text=True, env=env, timeout=800,
    )  # fmt: skip
    assert out.exists(), proc.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert len(results) == len(all_cases())
    missing = [r for r in results if r["status"] == "missing"]
    assert all(r["op"] in r["message"] for r in missing)
    bad = [r for r in results if r["status"] not in ("passed", "missing")]
    known = {(lib, op, case) for lib, op, case in KNOWN_GAPS if lib == library}
    unexpected = [r for r in bad if (library, r["op"], r["case_id"]) not in known]
    table = "\n".join(f"{r['op']}/{r['case_id']}: {r['status']} {r['message']}"
                      for r in unexpected)  # fmt: skip
    assert not unexpected, f"{library}: {len(unexpected)} case(s) fail:\n{table}"
    fixed = known - {(library, r["op"], r["case_id"]) for r in bad}
    assert not fixed, f"{library}: listed as known gaps but now pass: {sorted(fixed)}"
    if not known:
        assert proc.returncode == 0, proc.stdout[-3000:]
