"""Every precision configuration runs in its own worker on a tiny conv/matmul chain.

Each participant goes through the real worker pool (so ``settings["env"]`` reaches the
process before its library is imported), records the settings really in effect, and its
anchors are compared with an ``onnx.reference`` float64 run of the same chain.

Tolerances, measured on this chain (tensorflow 2.21, torch 2.14, jax 0.10, paddle 3.3,
onnxruntime 1.32, openvino 2026.4; 2-core AVX2 AMD EPYC):

- fp32 configurations: relative L2 to fp64 between 1.5e-7 and 1.4e-6 over all anchors
  (largest: the 4096-long MatMul output). ``FP32_TOL`` = 1e-5 is 7x the largest and
  ~300x below the smallest bf16 error, so it separates the two without being tight.
- bf16 configurations: 2.9e-3 .. 5.6e-3 (bf16's unit roundoff is 2^-9 = 2.0e-3: rounding
  the operands of a dot product and its result lands there). ``BF16_RANGE`` is the
  1e-3..1e-2 band a bf16 computation of a conv/matmul falls in.
- Deployment runtimes' fp16 configurations (weights stored in fp16, some also computing in
  it): 2.2e-4 .. 1.05e-3 (AVX512-BF16 EPYC; fp16's unit roundoff is 2^-11 = 4.9e-4, and
  rounding the weights alone gives ~2e-4). ``FP16_RANGE`` is the 1e-4..1e-2 band.
  ncnn[bf16] (bf16 storage) and paddle_inference[bf16] (oneDNN bf16): 2.3e-3 .. 4.3e-3.
- openvino[f16] computes in f16 only where the CPU has fp16 arithmetic (AVX512-FP16),
  otherwise in f32 (its recorded ``precision`` says which): 3.8e-4 .. 5.6e-4 on a 2-core
  Sapphire Rapids Xeon, in ``FP16_RANGE``; openvino[bf16] in bf16 falls in ``BF16_RANGE``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from precision_chain import capture, chain_input, reference64, rel_l2, run_participants

from anpred.execution.pool import WorkerResult
from anpred.library import get_library
from anpred.participants import CONFIGURATIONS, REFERENCE64, parse_participant

FP32_TOL = 1e-5
BF16_RANGE = (1e-3, 1e-2)
FP16_RANGE = (1e-4, 1e-2)
ANCHORS = ("r1", "c2", "output")

Check = Callable[[dict[str, Any]], bool]

#: What each configuration must record as in effect (beyond running).
IN_EFFECT: dict[str, Check] = {
    "torch[compile]": lambda s: s["compile"] is True and s["compile_backend"] == "inductor",
    "torch[bf16]": lambda s: s["autocast"] == "bfloat16" and "bfloat16" in s["output_dtypes"],
    "tensorflow[xla]": lambda s: s["jit_compile"] is True,
    "tensorflow[onednn]": lambda s: (
        s["onednn"] is True and s["env"] == {"TF_ENABLE_ONEDNN_OPTS": "1"}
    ),
    "tensorflow[onednn-off]": lambda s: (
        s["onednn"] is False and s["env"] == {"TF_ENABLE_ONEDNN_OPTS": "0"}
    ),
    "tensorflow[bf16]": lambda s: s["bf16_in_effect"] is True and s["onednn"] is True,
    "jax[nojit]": lambda s: s["jit"] is False,
    "jax[bf16]": lambda s: s["dtype"] == "bfloat16" and s["output_dtypes"] == ["bfloat16"],
    **{f"onnxruntime[O{i}]": (lambda s, i=i: s["optimization"] == f"O{i}") for i in range(4)},
    "openvino[bf16]": lambda s: s["precision"] in ("bf16", "f32"),
    "paddle[static]": lambda s: s["mode"] == "static",
}

#: Configurations whose conv/matmul compute in bfloat16 whatever the CPU.
BF16 = {"torch[bf16]", "tensorflow[bf16]", "jax[bf16]"}
#: Deployment runtimes' configurations with weights (at least) in a 16-bit float whatever
#: the CPU, and the band their error falls in.
RUNTIME_REDUCED = {
    "litert[fp16]": FP16_RANGE,
    "ncnn[fp16-weights]": FP16_RANGE,
    "mnn[fp16]": FP16_RANGE,
    "tvm[fp16]": FP16_RANGE,
    "executorch[fp16]": FP16_RANGE,
    "ncnn[bf16]": BF16_RANGE,
}
#: The precision classes' ideal references (fp64 with results rounded to the format,
#: issue 35); measured on this chain: bf16 2.9e-3 .. 4.7e-3 (as the bf16 configurations),
#: fp16 and tf32 (both 10 fraction bits) 3.8e-4 .. 5.6e-4, bf16 weights alone 1.7e-3 ..
#: 2.6e-3, fp16 weights alone 2.2e-4 .. 4.2e-4.
IDEAL = {
    "torch[ideal-bf16]": BF16_RANGE,
    "torch[ideal-fp16]": FP16_RANGE,
    "torch[ideal-tf32]": FP16_RANGE,
    "torch[ideal-bf16-weights]": BF16_RANGE,
    "torch[ideal-fp16-weights]": FP16_RANGE,
}
#: Runtime configurations that use 16-bit arithmetic only where the CPU has it: each
#: anchor is at fp32's level or in the band (ncnn's fp16 arithmetic needs ARMv8.2/AVX512-FP16;
#: on this EPYC only its fully connected layer stores fp16: 1.7e-6 at the convs, 3.8e-4 at
#: the output; Paddle's oneDNN bf16 reports whether the CPU supports it).
CPU_DEPENDENT = {"ncnn[fp16]": FP16_RANGE}

#: The default suite runs one configuration per code path added for precision
#: configurations; the slow matrix runs all of them.
FAST = [
    "torch",
    "torch[bf16]",
    "tensorflow[onednn-off]",
    "tensorflow[bf16]",
    "jax[bf16]",
    "openvino[bf16]",
    "paddle[static]",
]
ALL = [
    pytest.param(
        name,
        marks=pytest.mark.skipif(
            not get_library(lib).available(), reason=f"{lib} is not available (make runtimes)"
        ),
        id=name,
    )
    for lib, configs in CONFIGURATIONS.items()
    for c in configs
    if (name := f"{lib}[{c}]" if c else lib) != REFERENCE64
]


def _reduced_precision(name: str, settings: dict[str, Any]) -> bool:
    """Whether ``name`` really computed in a 16-bit float here (OpenVINO may fall back)."""
    if name.startswith("openvino["):
        return settings.get("precision", "f32") != "f32"
    if name == "paddle_inference[bf16]":
        return bool(settings.get("bf16_supported"))
    return name in BF16 or name in RUNTIME_REDUCED or name in IDEAL


def _band(name: str, settings: dict[str, Any]) -> tuple[float, float]:
    """The error band of a configuration that computed in a 16-bit float here."""
    if name.startswith("openvino[") and settings.get("precision") == "f16":
        return FP16_RANGE
    return {**RUNTIME_REDUCED, **IDEAL}.get(name, BF16_RANGE)


def _check(run_dir: Path, name: str, result: WorkerResult) -> None:
    assert result.status == "ok", f"{name}: {result.status} at {result.step}: {result.message}"
    settings = result.settings
    assert IN_EFFECT.get(name, lambda s: True)(settings), f"{name} recorded {settings}"
    reference = reference64(chain_input())
    arrays = capture(run_dir, name)
    errors = {k: rel_l2(arrays[k], reference[k]) for k in ANCHORS}
    if name in CPU_DEPENDENT:
        low, high = CPU_DEPENDENT[name]
        assert all(e <= FP32_TOL or low <= e <= high for e in errors.values()), errors
    elif _reduced_precision(name, settings):
        low, high = _band(name, settings)
        assert all(low <= e <= high for e in errors.values()), f"{name}: {errors}"
    else:
        assert all(e <= FP32_TOL for e in errors.values()), f"{name}: {errors}"


def _available() -> list[str]:
    """The configurations of :data:`ALL` whose library is installed."""
    return [p.values[0] for p in ALL if not any(m.args[0] for m in p.marks)]


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, WorkerResult]]:
    run_dir = tmp_path_factory.mktemp("precision-all")
    return run_dir, run_participants(run_dir, [parse_participant(n) for n in _available()])


@pytest.fixture(scope="module")
def fast_run(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> tuple[Path, dict[str, WorkerResult]]:
    """The :data:`FAST` configurations' run; the full run's when this session makes that
    one anyway (the slow tests are selected): the same workers on the same chain, and more.
    """
    full = any(getattr(item, "originalname", "") == "test_every_configuration"
               and getattr(item, "module", None) is request.module
               for item in request.session.items)  # fmt: skip
    if full and set(FAST) <= set(_available()):
        return request.getfixturevalue("full_run")
    run_dir = tmp_path_factory.mktemp("precision-fast")
    return run_dir, run_participants(run_dir, [parse_participant(n) for n in FAST])


@pytest.mark.parametrize("name", FAST)
def test_configuration_runs_records_settings_and_numbers(fast_run, name: str) -> None:
    run_dir, results = fast_run
    _check(run_dir, name, results[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_every_configuration(full_run, name: str) -> None:
    run_dir, results = full_run
    _check(run_dir, name, results[name])


def test_bf16_really_changes_the_numbers(fast_run) -> None:
    run_dir, _ = fast_run
    fp32 = capture(run_dir, "torch")
    for name in BF16:
        arrays = capture(run_dir, name)
        errors = [rel_l2(arrays[k], fp32[k]) for k in ANCHORS]
        assert all(BF16_RANGE[0] <= e <= BF16_RANGE[1] for e in errors), (name, errors)
