"""Every fault kind, in every library, on the fault chain (``fault_chain.py``).

Each library runs in its own subprocess (``fault_check.py``): the clean participant, every
fault below, and the clean participant again. For each fault the test checks that

* every anchor before the faulted stage is bit-identical to the clean run, in anchored
  inference and in stage isolation, and every isolated anchor after it too (isolation
  feeds clean anchors, so the fault must stay inside its stage);
* the faulted stage's anchor is what the fault's definition gives, computed in numpy
  from the clean run (bit-exact for the elementwise roundings; for the others within the
  float32 noise of re-computing the op, far below the fault's own effect), and its
  relative change has the order of magnitude the format implies;
* the plain graph carries the fault too, and its transform records it (the ground truth
  the worker writes into ``status.json``), while the runner's settings know nothing of it;
* the clean participant after the faulty ones is bit-identical to the one before.

torch (translated) and onnxruntime are fast and run by default; jax, TensorFlow, paddle
and OpenVINO compile or import for longer and are marked slow.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from fault_chain import ANCHORS, feed, weights
from fault_reference import (
    bf16_reference,
    fp16_reference,
    s2_conv_reference,
    truncate_reference,
)
from fault_runs import LibraryRun, library_params, run_library

from anpred.inject.kinds import activation_table

ORDER = list(ANCHORS)

#: name → (fault, stage whose anchor it changes first).
CASES: dict[str, dict[str, Any]] = {
    "bf16": {"stage": "s2", "op": "Conv", "kind": "bf16", "severity": 1},
    "bf16_x10": {"stage": "s2", "op": "Conv", "kind": "bf16", "severity": 10},
    "fp16": {"stage": "s2", "op": "Conv", "kind": "fp16", "severity": 1},
    "mantissa7": {"stage": "s2", "op": "Conv", "kind": "mantissa", "severity": 7},
    "mantissa14": {"stage": "s2", "op": "*", "kind": "mantissa", "severity": 14},
    "lowp_accum": {"stage": "s2", "op": "Conv", "kind": "lowp_accum", "severity": 1},
    "approx_sigmoid": {"stage": "s3", "op": "Sigmoid", "kind": "approx_act", "severity": 0.5},
    "approx_head": {"stage": "output", "op": "*", "kind": "approx_act", "severity": 0.5},
    "eps_ln": {"stage": "s4", "op": "LayerNormalization", "kind": "eps", "severity": 50},
    "eps_bn": {"stage": "s1", "op": "*", "kind": "eps", "severity": 100},
}

#: Relative L2 change of the faulted anchor, from the number format: rounding to p
#: significant bits moves a value by at most 2**-p relative (nearest) or 2**(1-p)
#: (truncation), and by at least a quarter of that in RMS over many values (uniform
#: rounding error). bfloat16: p=8, float16: p=11, mantissa k: p=k+1, truncating.
#: Other faults: bands around the change measured on this chain (all six libraries within
#: 3% of each other): lowp_accum 2.9e-4, approx Sigmoid h=0.5 2.3e-4 (its largest error is
#: h²/8·max|σ''| = 3.0e-3), approx head 1.5e-2, eps LayerNorm x50 1.3e-3, eps BN x100 0.44.
BANDS = {
    "bf16": (2.0**-8 / 4, 2.0**-8),
    "bf16_x10": (10 * 2.0**-8 / 4, 10 * 2.0**-8),
    "fp16": (2.0**-11 / 4, 2.0**-11),
    "mantissa7": (2.0**-7 / 4, 2.0**-7),
    "mantissa14": (2.0**-14 / 4, 2.0**-14),
    "lowp_accum": (5e-5, 2e-3),
    "approx_sigmoid": (5e-5, 2e-3),
    "approx_head": (2e-3, 1e-1),
    "eps_ln": (2e-4, 1e-2),
    "eps_bn": (0.1, 1.0),
}


def _stage_of(name: str) -> str:
    return CASES[name]["stage"]


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture(scope="module", params=library_params())
def library_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, LibraryRun]:
    library = request.param
    return library, run_library(library, CASES, tmp_path_factory.mktemp(f"faults-{library}"))


def _pwl(op: str, x: np.ndarray, step: float) -> np.ndarray:
    start, values, slopes = activation_table(op, step)
    n = len(values)
    t = (np.clip(x, start, start + n * step) - start) * np.float32(1 / step)
    i = np.minimum(np.floor(t), n - 1)
    return values[i.astype(int)] + (t - i) * slopes[i.astype(int)]


def _layer_norm(s3: np.ndarray, epsilon: float) -> np.ndarray:
    w = weights()
    x = s3.astype(np.float64).transpose(0, 2, 3, 1)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * w["ln_scale"] + w["ln_bias"]


def _batch_norm_s1(epsilon: float) -> np.ndarray:
    w = weights()
    x = np.pad(feed().astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = (
        sum(
            np.einsum("nchw,oc->nohw", x[:, :, i : i + 16, j : j + 16], w["w1"][:, :, i, j])
            for i in range(3)
            for j in range(3)
        )
        + w["b1"][None, :, None, None]
    )
    shape = (1, -1, 1, 1)
    return (conv - w["bn_mean"].reshape(shape)) / np.sqrt(w["bn_var"].reshape(shape) + epsilon) * w[
        "bn_scale"
    ].reshape(shape) + w["bn_bias"].reshape(shape)


def _check_definition(
    name: str, clean: dict[str, np.ndarray], faulty: dict[str, np.ndarray], prefix: str
) -> None:
    """The faulted anchor equals the fault's definition applied to the clean run."""
    s1, s2, s3 = (clean[f"{prefix}/{k}"] for k in ("s1", "s2", "s3"))
    got = faulty[f"{prefix}/{_stage_of(name)}"]
    if name == "bf16":
        np.testing.assert_array_equal(got, bf16_reference(s2))
    elif name == "bf16_x10":
        expected = s2 + np.float32(10) * (bf16_reference(s2) - s2)
        np.testing.assert_allclose(got, expected, rtol=2e-7, atol=0)  # fma or not: 1 ulp
    elif name == "fp16":
        np.testing.assert_array_equal(got, fp16_reference(s2))
    elif name.startswith("mantissa"):
        np.testing.assert_array_equal(got, truncate_reference(s2, CASES[name]["severity"]))
    elif name == "lowp_accum":
        rounded = s2_conv_reference(s1, fp16_reference)
        exact = s2_conv_reference(s1, lambda a: a)
        # float32 noise of recomputing the conv (measured ≤ 1.2e-7) vs the fault (2.9e-4)
        assert _rel(got, rounded) < 1e-6 < 1e-4 < _rel(got, exact)
    elif name == "approx_sigmoid":
        expected = s2 * _pwl("Sigmoid", s2, 0.5)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6 * np.abs(s2).max())
        exact = s2.astype(np.float64) / (1 + np.exp(-s2.astype(np.float64)))
        error = np.abs(got - exact)
        assert error.max() <= 3.01e-3 * np.abs(s2).max() and error.max() > 1e-5
    elif name == "eps_ln":
        assert _rel(got, _layer_norm(s3, 5e-4)) < 1e-5 < 1e-4 < _rel(got, _layer_norm(s3, 1e-5))
    elif name == "eps_bn":
        assert _rel(got, _batch_norm_s1(1e-3)) < 1e-5 < 1e-2 < _rel(got, _batch_norm_s1(1e-5))


@pytest.mark.parametrize("name", list(CASES))
def test_fault_changes_its_stage_only_and_as_defined(
    library_run: tuple[str, LibraryRun], name: str
) -> None:
    library, run = library_run
    result = run.results[name]
    assert "error" not in result, result.get("error")
    clean, faulty = run.arrays("clean"), run.arrays(name)
    stage = _stage_of(name)
    index = ORDER.index(stage)
    for key in ORDER[:index]:
        assert np.array_equal(faulty[f"infer/{key}"], clean[f"infer/{key}"]), key
    for key in ORDER:
        same = np.array_equal(faulty[f"isolated/{key}"], clean[f"isolated/{key}"])
        assert same == (key != stage), f"isolated {key}"
    for key in ORDER[index:]:
        assert not np.array_equal(faulty[f"infer/{key}"], clean[f"infer/{key}"]), key
    low, high = BANDS[name]
    change = _rel(faulty[f"infer/{stage}"], clean[f"infer/{stage}"])
    assert low <= change <= high, f"{name}: relative change {change:.2e}"
    _check_definition(name, clean, faulty, "infer")
    _check_definition(name, clean, faulty, "isolated")
    plain_change = _rel(faulty["plain"], clean["plain"])
    output_change = _rel(faulty["infer/output"], clean["infer/output"])
    assert math.isclose(plain_change, output_change, rel_tol=0.05)
    record = result["fault"]
    assert "fault" not in result["settings"]  # a transform, not a setting of the library
    assert {k: record[k] for k in ("stage", "op", "kind", "severity")} == CASES[name]
    assert record["nodes"] and record["label"] == f"{CASES[name]['kind']}@{stage}"


def test_clean_participant_is_untouched_by_faulty_ones(library_run: tuple[str, LibraryRun]) -> None:
    _, run = library_run
    before, after = run.arrays("clean"), run.arrays("clean_after")
    assert before.keys() == after.keys()
    for key in before:
        assert np.array_equal(before[key], after[key]), key
    assert run.results["clean"]["fault"] is None
    assert "fault" not in run.results["clean"]["settings"]
