"""Deployment runtimes in the library registry: `--libs runtimes`, `anpred libs`, and the
Python their workers run (their own environment's)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anpred.errors import UsageError
from anpred.execution.pool import participant_python
from anpred.library import Loads, libraries
from anpred.library.runtimes import RUNTIME_LIBRARIES
from anpred.participants import DEFAULT_LIBRARIES, parse_participant, parse_participants

ROOT = Path(__file__).resolve().parents[2]


def _built_mnn(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A recorded, built "mnn" environment whose site folder holds an MNN 3.6.1."""
    prefix = tmp / "rt-mnn"
    site = prefix / "site-packages"
    (site / "MNN").mkdir(parents=True)
    (site / "MNN" / "__init__.py").write_text("")
    meta = site / "mnn-3.6.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: MNN\nVersion: 3.6.1\n")
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").write_text("#!/bin/sh\n")
    (prefix / ".ready").touch()
    locks = tmp / "locks"
    locks.mkdir()
    (locks / "mnn.txt").write_text("mnn==3.6.1\n")
    lock = hashlib.sha256(b"mnn==3.6.1\n").hexdigest()[:16]
    record = {"python": str(prefix / "bin" / "python"), "site": [str(site)], "lock": lock}
    (tmp / "envs.json").write_text(json.dumps({"mnn": record}))
    monkeypatch.setenv("ANPRED_RUNTIME_ENVS", str(tmp / "envs.json"))
    monkeypatch.setenv("ANPRED_RUNTIME_LOCKS", str(locks))
    return prefix / "bin" / "python"


def test_runtimes_are_registered_after_the_builtins_and_not_in_all() -> None:
    names = [lib.name for lib in libraries()]
    runtimes = [lib.name for lib in RUNTIME_LIBRARIES]
    builtins = names.index("paddle")
    assert names[builtins + 1 : builtins + 1 + len(runtimes)] == runtimes
    assert not set(runtimes) & set(DEFAULT_LIBRARIES)
    assert all(lib.loads == Loads.CONVERTED_ARTIFACT for lib in RUNTIME_LIBRARIES)


def test_libs_runtimes_selects_the_built_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANPRED_RUNTIME_ENVS", str(tmp_path / "none.json"))
    with pytest.raises(UsageError, match="no deployment runtime is installed.*make runtimes"):
        parse_participants("runtimes")
    with pytest.raises(UsageError, match="library 'mnn' is not installed.*make runtime NAME=mnn"):
        parse_participants("torch,mnn[low]")
    python = _built_mnn(tmp_path, monkeypatch)
    assert [p.name for p in parse_participants("torch,runtimes")] == ["torch", "mnn"]
    assert parse_participant("mnn[fp16]").settings == {"fp16_weights": True}
    # its worker runs the environment's Python, this clone's anpred first on PYTHONPATH,
    # pip offline; a library of the main environment runs anpred's own Python
    command, env = participant_python(parse_participant("mnn[low]"))
    assert command == str(python)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT / "src")
    assert env["PIP_NO_INDEX"] == "1"
    assert participant_python(parse_participant("onnxruntime")) == ("", {})
    # a lock that changed since the build: unavailable again
    (tmp_path / "locks" / "mnn.txt").write_text("mnn==3.6.2\n")
    with pytest.raises(UsageError, match="older than mnn.txt: run `make runtime NAME=mnn`"):
        parse_participants("mnn")


def test_anpred_libs_shows_converters_and_environments(tmp_path: Path) -> None:
    env = {**os.environ, "ANPRED_RUNTIME_ENVS": str(tmp_path / "none.json")}
    command = [sys.executable, "-m", "anpred", "libs"]
    table = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    assert "deployment runtimes (--libs runtimes; not in --libs all):" in table
    rows = table.splitlines()
    row = next(line for line in rows if line.startswith("mnn ") and "MNNConvert" in line)
    assert "mnn (not built)" in row
    data = subprocess.run(
        [*command, "--json"], capture_output=True, text=True, env=env, check=True
    ).stdout
    entry = {e["library"]: e for e in json.loads(data)}["litert"]
    assert entry["converter"] == "onnx2tf" and entry["environment"] == "litert"
    assert entry["environment_built"] is False and not entry["in_all"]
    assert set(entry["participants"]) == {"litert", "litert[fp16]", "litert[noxnnpack]"}
