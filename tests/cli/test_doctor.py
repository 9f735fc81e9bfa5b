"""``anpred doctor``: installed libraries, runtime environments, CPU, memory and disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anpred.cli import doctor_command
from anpred.cli.main import main
from anpred.library import Library, Loads, libraries


def _doctor(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANPRED_RUNTIME_ENVS": str(tmp / "none.json")}  # no runtime built
    return subprocess.run(
        [sys.executable, "-m", "anpred", "doctor", "--out", str(tmp / "runs"), *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def test_doctor_lists_libraries_runtime_environments_and_the_machine(tmp_path: Path) -> None:
    proc = _doctor(tmp_path)
    lines = proc.stdout.splitlines()
    torch = next(line for line in lines if line.split()[:1] == ["torch"])
    assert "missing" not in torch and torch.split()[1][0].isdigit()  # its version
    # every runtime environment is listed, with the runtimes in it and the command that
    # builds it
    deploy = next(line for line in lines if line.strip().startswith("torch-deploy "))
    assert "(ncnn, executorch)" in deploy
    assert "not built: run `make runtime NAME=torch-deploy`" in deploy
    litert = next(line for line in lines if line.strip().startswith("litert "))
    assert "`make runtime NAME=litert`" in litert
    assert any(line.startswith("cpu: ") for line in lines)
    assert "bf16 arithmetic: " in proc.stdout
    assert "memory: " in proc.stdout and "disk: " in proc.stdout
    # a machine that runs the test suite can run a typical run
    assert proc.returncode == 0, proc.stdout
    assert lines[-1] == "ok: a typical run can go ahead"


def test_doctor_json_carries_the_same_facts(tmp_path: Path) -> None:
    proc = _doctor(tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    main_libs = {lib.name for lib in libraries() if not lib.environment}
    assert {lib["name"] for lib in data["libraries"]} == main_libs
    envs = {env["environment"]: env for env in data["runtime_envs"]}
    assert envs["torch-deploy"]["runtimes"] == ["ncnn", "executorch"]
    assert envs["litert"]["built"] is False
    assert envs["litert"]["build"] == "make runtime NAME=litert"
    assert data["problems"] == []
    assert data["memory_budget"] >= doctor_command.TYPICAL_MEMORY


def test_doctor_says_what_is_off_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing_torch = Library(
        name="torch", distributions=("no-such-distribution",), extra="torch",
        import_name="no_such_module_anpred", runner="x:Y", loads=Loads.NATIVE_MODULE,
    )  # fmt: skip
    monkeypatch.setattr(doctor_command, "libraries", lambda: [missing_torch])
    monkeypatch.setattr(doctor_command, "available_memory", lambda: 500 * 10**6)
    monkeypatch.setattr(doctor_command, "_free_disk", lambda folder: (10**8, folder))
    assert main(["doctor", "--out", str(tmp_path)]) == 1
    problems = [
        line for line in capsys.readouterr().out.splitlines() if line.startswith("problem: ")
    ]
    assert len(problems) == 4, problems
    assert "torch is missing" in problems[0] and "pip install 'anpred[torch]'" in problems[0]
    assert "0 libraries installed: a comparison needs two" in problems[1]
    assert problems[2].startswith("problem: memory: a run may use 381.5 MB")
    assert problems[3].startswith("problem: disk: 95.4 MB free")
