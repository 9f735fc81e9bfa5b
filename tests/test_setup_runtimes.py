"""Runtime environments: scripts/setup-runtimes.sh (`make runtimes`, `make runtime NAME=x`)
and how anpred finds them.

One pinned environment per lock file, in the shared cache keyed by the lock's hash, built
once and skipped quietly afterwards; anpred is never installed into it: a worker gets this
clone's anpred through PYTHONPATH (anpred.library.environments.worker_pythonpath).
`make env` builds none of them (ANPRED_RUNTIMES=none): it only records those already built.
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
    # building only some environments keeps the others that are built in the record; a
    # named environment that fails to build fails the command (`make runtime NAME=broken`)
    subset = _setup(tmp_path, ANPRED_RUNTIMES="broken")
    assert subset.returncode == 1 and "building the tiny" not in subset.stdout
    assert json.loads((tmp_path / "envs.json").read_text()) == record
    # a name without a lock file is refused in one line naming the environments there are
    unknown = _setup(tmp_path, ANPRED_RUNTIMES="ncnn")
    assert unknown.returncode == 2
    assert "no runtime environment named 'ncnn'" in unknown.stderr
    assert "environments: broken tiny" in unknown.stderr
    # ... or, for a runtime's name, the environment whose lock header names it
    (locks / "tiny.txt").write_text("# the environment of `tinyrt`\ncolorama==0.4.6\n")
    alias = _setup(tmp_path, ANPRED_RUNTIMES="tinyrt")
    assert alias.returncode == 2
    assert "tinyrt is built in environment tiny: make runtime NAME=tiny" in alias.stderr
    (locks / "tiny.txt").write_text("# a full lock of one package\ncolorama==0.4.6\n")
    # `make env` (none): builds nothing, records what is built (a rebuilt .venv finds it
    # again) and names the command that builds the rest
    (tmp_path / "envs.json").unlink()
    (locks / "fresh.txt").write_text("colorama==0.4.6\n")
    recorded = _setup(tmp_path, ANPRED_RUNTIMES="none")
    assert recorded.returncode == 0 and "building" not in recorded.stdout
    assert json.loads((tmp_path / "envs.json").read_text()) == record
    assert "not built: broken fresh (`make runtimes` builds them" in recorded.stdout
    assert not list((tmp_path / "cache").glob("rt-fresh-*"))
    (locks / "fresh.txt").unlink()
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
    # a changed lock, a missing lock, a missing environment: unavailable, with the command
    # that builds that environment
    (locks / "tiny.txt").write_text("colorama==0.4.5\n")
    assert "older than tiny.txt: run `make runtime NAME=tiny`" in missing_reason("tiny")
    assert not library.available() and "make runtime NAME=tiny" in library.install_hint()
    assert "lock file" in missing_reason("nothing") and "missing" in missing_reason("nothing")
    (locks / "other.txt").write_text("\n")
    assert missing_reason("other") == (
        "its environment 'other' is not built: run `make runtime NAME=other` (or `make runtimes`)"
    )


def test_run_with_an_unbuilt_runtime_names_the_command_that_builds_it(tmp_path: Path) -> None:
    env = {**os.environ, "ANPRED_RUNTIME_ENVS": str(tmp_path / "none.json")}
    for libs, command in (
        ("litert", "make runtime NAME=litert"),
        ("torch,ncnn", "make runtime NAME=torch-deploy"),  # ncnn lives in torch-deploy
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "anpred", "run", "yolov8n", "--libs", libs,
             "--out", str(tmp_path / "run")],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and f"`{command}`" in lines[0], proc.stderr
        assert not (tmp_path / "run").exists()  # refused before anything was prepared
