"""Participant names, precision configurations and their per-worker environment.

No DL library is imported here: parsing and environments are plain Python.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from anpred.errors import UsageError
from anpred.execution.pool import participant_env
from anpred.participants import CONFIGURATIONS, parse_participant, parse_participants
from anpred.translate.process_env import check_process_env

ONEDNN = "TF_ENABLE_ONEDNN_OPTS"

#: Configurations this project promises (DESIGN.md "Precision configurations").
PRECISION_CONFIGURATIONS = {
    "torch[compile]": {"compile": True},
    "torch[bf16]": {"autocast": "bfloat16"},
    "tensorflow[xla]": {"jit_compile": True},
    "tensorflow[onednn]": {"env": {ONEDNN: "1"}},
    "tensorflow[onednn-off]": {"env": {ONEDNN: "0"}},
    "tensorflow[bf16]": {"mixed_precision": "bfloat16", "env": {ONEDNN: "1"}},
    "jax[nojit]": {"jit": False},
    "jax[bf16]": {"dtype": "bfloat16"},
    "onnxruntime[O0]": {"optimization": "O0"},
    "onnxruntime[O3]": {"optimization": "O3"},
    "openvino[bf16]": {"precision": "bf16"},
    "paddle[static]": {"static": True},
}


def all_names() -> list[str]:
    return [f"{lib}[{c}]" if c else lib for lib, configs in CONFIGURATIONS.items() for c in configs]


@pytest.mark.parametrize("name", all_names())
def test_every_configuration_parses_to_its_own_name(name: str) -> None:
    p = parse_participant(name)
    assert p.name == name
    assert dict(p.settings) == CONFIGURATIONS[p.library][p.config]
    assert p.to_dict()["settings"] == dict(p.settings)


@pytest.mark.parametrize(("name", "settings"), PRECISION_CONFIGURATIONS.items())
def test_precision_configurations_exist_with_their_settings(name: str, settings: dict) -> None:
    assert dict(parse_participant(name).settings) == settings


def test_libs_accepts_a_mix_of_configurations() -> None:
    names = "torch,torch[bf16],onnxruntime[O0],openvino[bf16],jax[bf16]"
    assert [p.name for p in parse_participants(names)] == names.split(",")


def test_all_combines_with_configurations() -> None:
    defaults = [p.name for p in parse_participants("all")]
    names = [p.name for p in parse_participants(("all", "torch[bf16]", "jax[nojit]"))]
    assert names == [*defaults, "torch[bf16]", "jax[nojit]"]
    assert [p.name for p in parse_participants("torch[bf16],all")][1:] == defaults
    with pytest.raises(UsageError, match="listed twice"):
        parse_participants("all,torch")


def test_unknown_configuration_lists_the_library_choices() -> None:
    with pytest.raises(UsageError, match=r"paddle\[static\]") as err:
        parse_participant("paddle[amp]")
    assert "paddle[amp]" in str(err.value)


def test_environment_of_a_configuration() -> None:
    assert parse_participant("tensorflow[onednn-off]").environment() == {ONEDNN: "0"}
    assert parse_participant("tensorflow").environment() == {}


def test_participant_env_wins_over_caller_and_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ONEDNN, "1")
    env = participant_env(parse_participant("tensorflow[onednn-off]"), 3, {ONEDNN: "1"})
    assert env[ONEDNN] == "0"
    assert env["OMP_NUM_THREADS"] == "3"  # the common worker environment is kept
    plain = participant_env(parse_participant("tensorflow"), 1, {"ANPRED_X": "y"})
    assert plain[ONEDNN] == "1" and plain["ANPRED_X"] == "y"  # the caller's stays


def test_check_process_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ONEDNN, "0")
    assert check_process_env("tensorflow", {ONEDNN: 0}) == {ONEDNN: "0"}
    assert check_process_env("tensorflow", None) == {}
    monkeypatch.delenv(ONEDNN)
    with pytest.raises(UsageError, match="TF_ENABLE_ONEDNN_OPTS='0'.*worker pool"):
        check_process_env("tensorflow", {ONEDNN: "0"})
    with pytest.raises(UsageError, match="must map"):
        check_process_env("tensorflow", ["x"])  # type: ignore[arg-type]


def test_anpred_libs_lists_the_configurations() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "anpred", "libs"], capture_output=True, text=True, check=True
    )
    for name in PRECISION_CONFIGURATIONS:
        assert name in proc.stdout, name
