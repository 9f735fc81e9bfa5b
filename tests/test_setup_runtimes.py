"""Runtime environments: scripts/setup-runtimes.sh (run by `make env`) and how anpred finds them.

One pinned environment per lock file, in the shared cache keyed by the lock's hash, built
once and skipped quietly afterwards; anpred is never installed into it: a worker gets this
clone's anpred through PYTHONPATH (anpred.library.environments.worker_pythonpath).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from anpred.library import Library, Loads
from anpred.library.environments import missing_reason, runtime_env, worker_pythonpath

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "setup-runtimes.sh"


def _setup(tmp: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **extra,
        "ANPRED_VENV_CACHE": str(tmp / "cache"),
        "ANPRED_RUNTIME_LOCKS": str(tmp / "locks"),
        "ANPRED_RUNTIME_ENVS": str(tmp / "envs.json"),
        "PYTHON": sys._base_executable,
    }
    return subprocess.run(
        ["bash", str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def test_runtime_environments_are_built_once_recorded_and_run_this_clones_anpred(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("flock") is None:
        pytest.skip("needs flock (util-linux)")
    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / "tiny.txt").write_text("# a full lock of one package\ncolorama==0.4.6\n")
    (locks / "broken.txt").write_text("this is not a requirement !!!\n")
    first = _setup(tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "building the tiny runtime environment" in first.stdout
    assert "not built (their runtimes stay unavailable): broken" in first.stdout
    record = json.loads((tmp_path / "envs.json").read_text())
    assert set(record) == {"tiny"}  # the broken one is left out, the others unaffected
    python = Path(record["tiny"]["python"])
    assert python.parent.parent.name.startswith("rt-tiny-")
    assert (python.parent.parent / ".ready").exists()
    # built once: the second run skips it quietly
    again = _setup(tmp_path)
    assert again.returncode == 0 and "building the tiny" not in again.stdout
    assert json.loads((tmp_path / "envs.json").read_text()) == record
    # building only some environments keeps the others that are built in the record
    subset = _setup(tmp_path, ANPRED_RUNTIMES="broken")
    assert "building the tiny" not in subset.stdout
    assert json.loads((tmp_path / "envs.json").read_text()) == record
    # anpred is not installed there; the worker's PYTHONPATH brings this clone's code
    bare = subprocess.run([str(python), "-c", "import anpred"], capture_output=True)
    assert bare.returncode != 0
    code = "import anpred, colorama; print(anpred.__file__)"
    proc = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": worker_pythonpath()},
    )
    assert proc.stdout.strip() == str(ROOT / "src" / "anpred" / "__init__.py")
    # anpred finds it (no process started), and a library living in it is available
    monkeypatch.setenv("ANPRED_RUNTIME_ENVS", str(tmp_path / "envs.json"))
    monkeypatch.setenv("ANPRED_RUNTIME_LOCKS", str(locks))
    env = runtime_env("tiny")
    assert env is not None and env.python == python
    assert env.has_module("colorama") and env.version(("colorama",)) == "0.4.6"
    library = Library(
        name="tiny", distributions=("colorama",), extra="", requirement="tiny",
        import_name="colorama", runner="x:Y", loads=Loads.CONVERTED_ARTIFACT,
        environment="tiny",
    )
    assert library.available() and library.version() == "0.4.6"
    # a changed lock, a missing lock, a missing environment: unavailable, with `make env`
    (locks / "tiny.txt").write_text("colorama==0.4.5\n")
    assert "older than tiny.txt: run `make env`" in missing_reason("tiny")
    assert not library.available() and "make env" in library.install_hint()
    assert "lock file" in missing_reason("nothing") and "missing" in missing_reason("nothing")
    (locks / "other.txt").write_text("\n")
    assert missing_reason("other") == "its environment 'other' is not built: run `make env`"
