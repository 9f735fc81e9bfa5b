"""ONNX's backend node tests through every library, against the checked-in expectations.

DL-free unit tests of the harness first, then one subprocess per library (tensorflow and
paddle never share a process): the vision subset by default, every runnable test and the
fed-input mode marked slow. A test whose outcome changes (newly failing, or newly passing
without its expectation updated) fails; update with
``python -m conformance.backend_suite --library <lib> --update`` (and ``--mode fed``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conformance import backend_suite as suite
from conformance.backend_reasons import CATEGORIES, annotate
from conformance.backend_tests import (
    VISION_OPS,
    BackendTest,
    fed_feeds,
    load_tests,
    select,
    static_model,
)

EXPECTATIONS = Path(__file__).parent / "expectations"
#: ``python -m conformance...`` runs with this folder (the suites' package) on its path.
_SUITES = os.pathsep.join(
    [str(Path(__file__).resolve().parent), *filter(None, [os.environ.get("PYTHONPATH")])]
)

_PACKAGES = {"torch": "torch", "tensorflow": "tensorflow", "jax": "jax", "paddle": "paddle",
             "onnxruntime": "onnxruntime"}  # fmt: skip


def _by_name(name: str) -> BackendTest:
    return next(t for t in load_tests() if t.name == name)


def test_vision_subset_has_43_op_types() -> None:
    assert len(set(VISION_OPS)) == len(VISION_OPS) == 43


def test_loading_is_seeded_and_filters_to_float32_tensor_tests() -> None:
    tests = load_tests()
    names = {t.name for t in tests}
    assert "test_conv_with_strides_padding" in names
    assert "test_cast_FLOAT_to_DOUBLE" not in names  # float64 output: not runnable
    assert all(any(a.dtype == np.float32 for a in (*t.inputs, *t.outputs)) for t in tests)
    vision = select(tests, "vision")
    assert 0 < len(vision) < len(tests)
    assert all(t.op_types <= set(VISION_OPS) for t in vision)


def test_static_model_turns_later_inputs_into_initializers() -> None:
    test = _by_name("test_conv_with_strides_padding")
    model, feeds = static_model(test)
    assert [vi.name for vi in model.graph.input] == ["x"]
    assert list(feeds) == ["x"] and feeds["x"] is test.inputs[0]
    assert [init.name for init in model.graph.initializer] == ["W"]
    assert len(test.model.graph.input) == 2  # the test's own model is untouched
    assert list(fed_feeds(test)) == ["x", "W"]


def test_compare_checks_shape_dtype_and_values() -> None:
    test = _by_name("test_relu")
    ref = test.outputs[0]
    assert suite.compare(test, [ref.copy()]) == ("pass", "")
    assert suite.compare(test, [ref.astype(np.float64)])[0] == "wrong"
    assert suite.compare(test, [ref[:1]])[0] == "wrong"
    shifted = ref + np.float32(2e-3) * np.maximum(np.abs(ref), 1)  # beyond rtol 1e-3
    assert suite.compare(test, [shifted.astype(np.float32)])[0] == "wrong"


def test_differences_catch_new_failures_and_new_passes() -> None:
    expected = {"a": {"outcome": "pass"}, "b": {"outcome": "error"}, "c": {"outcome": "pass"}}
    got = {"a": {"outcome": "wrong", "message": "m"}, "b": {"outcome": "pass"},
           "c": {"outcome": "pass"}}  # fmt: skip
    lines = suite.differences(got, expected)
    assert [line.split(":")[0] for line in lines] == ["a", "b"]


def test_annotate_gives_every_failure_a_category() -> None:
    records = {
        "test_x": {"outcome": "missing", "message": "op X has no jax translator", "vision": 1},
        "test_bn_training_mode": {"outcome": "error", "message": "e", "vision": True},
        "test_up": {"outcome": "wrong", "message": "w", "vision": True},
        "test_open": {"outcome": "error", "message": "boom", "vision": False},
        "test_ok": {"outcome": "pass", "message": "", "vision": True},
    }
    ort = {"test_up": {"outcome": "wrong"}, "test_open": {"outcome": "pass"}}
    entries = annotate("jax", records, ort)
    assert entries["test_x"]["category"] == "no translator"
    assert entries["test_bn_training_mode"]["category"] == "out of scope for inference"
    assert entries["test_up"]["category"] == "upstream difference"
    assert entries["test_open"] == {"outcome": "error", "vision": False, "category": "open",
                                    "reason": "boom"}  # fmt: skip
    assert "category" not in entries["test_ok"]


def test_only_random_ops_are_random_output() -> None:
    """Tests whose data are random (``*_random``) are judged like any other test."""
    failed = {"outcome": "error", "message": "m", "vision": False}
    names = ("test_reduce_sum_default_axes_keepdims_random", "test_randomnormal_like",
             "test_randomuniform", "test_bernoulli_seed")  # fmt: skip
    records = {name: failed for name in names}
    ort = {name: {"outcome": "pass"} for name in records}
    categories = {k: v["category"] for k, v in annotate("jax", records, ort).items()}
    assert categories.pop("test_reduce_sum_default_axes_keepdims_random") == "open"
    assert set(categories.values()) == {"out of scope for inference"}


def test_fed_failure_that_passes_static_needs_a_static_input() -> None:
    records = {
        "test_up": {"outcome": "error", "message": "Resize scales must be static", "vision": 1},
        "test_bad": {"outcome": "wrong", "message": "static", "vision": True},
        "test_new": {"outcome": "error", "message": "must be static", "vision": True},
    }
    ort = {name: {"outcome": "pass"} for name in records}
    static = {"test_up": {"outcome": "pass"}, "test_bad": {"outcome": "pass"},
              "test_new": {"outcome": "error"}}  # fmt: skip
    entries = annotate("jax", records, ort, static)
    assert entries["test_up"]["category"] == "needs a static input"
    assert entries["test_up"]["reason"].startswith("passes in static mode")
    assert entries["test_bad"]["category"] == "open"  # wrong values are never excused
    assert entries["test_new"]["category"] == "open"  # fails static too
    assert annotate("jax", records, ort)["test_up"]["category"] == "open"  # static mode


@pytest.mark.parametrize("library", suite.LIBRARIES)
def test_expectation_file_covers_every_runnable_test(library: str) -> None:
    for mode in ("static", "fed"):
        path = suite.expectation_path(EXPECTATIONS, library, mode)
        entries = json.loads(path.read_text())["tests"]
        assert set(entries) == {t.name for t in load_tests()}, path
        for name, entry in entries.items():
            assert entry["outcome"] in suite.OUTCOMES, name
            assert (entry["outcome"] == "pass") == ("category" not in entry), name
            assert entry.get("category", CATEGORIES[0]) in CATEGORIES, name


# --- every library, in its own process --------------------------------------------------


def _run(library: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(_PACKAGES[library]) is None:
        pytest.skip(f"{_PACKAGES[library]} is not installed")
    env = dict(os.environ, HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"),
               JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=_SUITES)  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "conformance.backend_suite", "--library", library,
         "--expectations", str(EXPECTATIONS), *args],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip


def _selected(request: pytest.FixtureRequest, name: str) -> bool:
    """Whether this session runs the test ``name`` of this file too (not deselected)."""
    return any(item.name == name and getattr(item, "module", None) is request.module
               for item in request.session.items)  # fmt: skip


@pytest.mark.parametrize("library", suite.LIBRARIES)
def test_vision_subset_matches_expectations(
    library: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    everything = f"test_all_runnable_tests_match_expectations[{library}-static]"
    if _selected(request, everything):  # the same tests, mode and expectations, and more
        pytest.skip(f"{everything} runs every test of the vision subset in this session")
    proc = _run(library, tmp_path, "--subset", "vision")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["static", "fed"])
@pytest.mark.parametrize("library", suite.LIBRARIES)
def test_all_runnable_tests_match_expectations(library: str, mode: str, tmp_path: Path) -> None:
    proc = _run(library, tmp_path, "--subset", "all", "--mode", mode)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
