"""Two clones sharing the cached environment each run their own code (issue 17, item 3).

``scripts/setup-env.sh`` keeps the libraries in one shared cache and gives every clone its
own small ``.venv`` with anpred installed from that clone. Before, the editable install
lived in the shared cache and pointed at whichever clone ran ``make env`` last.

``make env`` (and so ``make demo``, ``make test``) builds no deployment-runtime environment
(issue 42): it records those already built and names ``make runtimes`` for the rest.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _anpred_of(clone: Path) -> str:
    code = "import anpred; print(anpred.__file__)"
    out = subprocess.run(
        [str(clone / ".venv" / "bin" / "python"), "-c", code],
        capture_output=True, text=True, check=True,
    )
    return out.stdout.strip()


def test_a_second_clone_does_not_take_over_this_clones_environment(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs a git checkout")
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("needs `make env` to have run in this clone")
    other = tmp_path / "other-clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(other)], check=True)
    # the scripts as they are in this tree, committed or not
    for script in ("setup-env.sh", "setup-runtimes.sh"):
        shutil.copy(ROOT / "scripts" / script, other / "scripts" / script)
    # a runtime lock of its own (a hash no cache holds): setup-env.sh must not build it
    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / "tiny.txt").write_text(f"# {tmp_path}\ncolorama==0.4.6\n")
    env = {**os.environ, "PYTHON": sys.executable}
    setup = subprocess.run(
        ["bash", str(other / "scripts" / "setup-env.sh")],
        cwd=other, env={**env, "ANPRED_RUNTIME_LOCKS": str(locks)},
        capture_output=True, text=True, check=True, timeout=600,
    )
    assert _anpred_of(other).startswith(str(other.resolve()) + "/")
    assert "building the tiny runtime" not in setup.stdout
    assert "not built: tiny (`make runtimes` builds them" in setup.stdout
    assert json.loads((other / ".venv" / "anpred-runtimes.json").read_text()) == {}
    assert _anpred_of(ROOT).startswith(str(ROOT) + "/src/")
    # ... and running it again in this clone does not move the other one either.
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup-env.sh")],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=600,
    )
    assert _anpred_of(other).startswith(str(other.resolve()) + "/")
