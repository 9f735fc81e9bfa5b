from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_model import tiny_cnn


@pytest.fixture(scope="session")
def tiny_onnx(tmp_path_factory) -> Path:
    return tiny_cnn(tmp_path_factory.mktemp("model") / "tiny.onnx")


def anpred(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run the anpred CLI in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "anpred", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


RUN_FAILING = Path(__file__).parent / "run_failing.py"


def failing(symptom: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``anpred run ARGS`` with ``symptom`` (``PARTICIPANT:crash|hang|error|nan[:ONCE_FILE]``)."""
    return subprocess.run(
        [sys.executable, str(RUN_FAILING), symptom, *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())
