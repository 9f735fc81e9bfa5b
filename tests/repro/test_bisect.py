"""Settings bisection: candidate flips of a library's declared switches; descriptor switches."""

from __future__ import annotations

import pytest

from anpred.errors import UsageError
from anpred.library import Library, Loads, get_library
from anpred.repro.bisect import candidate_flips, flipped_settings


def test_env_switches_are_flipped_in_the_worker_environment() -> None:
    base = {"env": {"TF_ENABLE_ONEDNN_OPTS": "1", "OTHER": "x"}, "jit_compile": False}
    out = flipped_settings(base, {"env.TF_ENABLE_ONEDNN_OPTS": "0", "jit_compile": True})
    assert out == {"env": {"TF_ENABLE_ONEDNN_OPTS": "0", "OTHER": "x"}, "jit_compile": True}
    assert base["env"]["TF_ENABLE_ONEDNN_OPTS"] == "1"  # the participant's own untouched


def test_candidates_flip_away_from_the_participants_own_values() -> None:
    switches = get_library("tensorflow").switches
    singles = candidate_flips({}, switches, 1)  # tensorflow's default: oneDNN on, graph, no XLA
    assert {"env.TF_ENABLE_ONEDNN_OPTS": "0"} in singles
    assert {"jit_compile": True} in singles and {"function": False} in singles
    assert len(singles) == 3
    # tensorflow[onednn-off] flips oneDNN on
    off = get_library("tensorflow").configurations["onednn-off"]
    assert {"env.TF_ENABLE_ONEDNN_OPTS": "1"} in candidate_flips(off, switches, 1)
    mnn = get_library("mnn").switches
    assert {"winograd": False} in candidate_flips({}, mnn, 1)
    pairs = candidate_flips({}, mnn, 2)
    assert all(len(p) == 2 for p in pairs) and {"winograd": False, "fp16_weights": True} in pairs


def test_a_switch_needs_two_values() -> None:
    with pytest.raises(UsageError, match="at least two values"):
        Library("x", ("x",), "x", "x", "m:C", Loads.ONNX_FILE, switches={"a": (1,)})
