"""``anpred repro`` / ``anpred bisect`` end to end on the tiny model, and their bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from repro_models import tiny_cnn

import anpred
from anpred.store.repro_record import Status

ENV = {"JAX_PLATFORMS": "cpu"}


def cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run the anpred CLI in a subprocess."""
    return subprocess.run([sys.executable, "-m", "anpred", *args], capture_output=True,
                          text=True, env={**os.environ, **ENV}, timeout=timeout)  # fmt: skip


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = cli("repro", str(tmp_path / "missing"))
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0
    assert "no run directory" in done.stderr
    (tmp_path / "empty").mkdir()
    done = cli("repro", str(tmp_path / "empty"))
    assert done.returncode == 2 and "not an analysed run directory" in done.stderr
    done = cli("bisect", str(tmp_path / "empty"))
    assert done.returncode == 2 and "--finding" in done.stderr


@pytest.mark.slow
def test_repro_of_an_injected_fault_is_the_faulty_operator_alone_and_verified(
    tmp_path: Path,
) -> None:
    tiny_cnn(tmp_path / "tiny.onnx", anchors_out=False)
    run = tmp_path / "run"
    done = cli("inject", str(tmp_path / "tiny.onnx"), "--lib", "onnxruntime", "--node",
               "/block2/act/Sigmoid", "--fault", "bf16", "--libs", "torch,onnxruntime,openvino,jax",
               "--images", "2", "--out", str(run))  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    bad = cli("repro", str(run), "--finding", "jax@s1")
    assert bad.returncode == 2 and "was not drilled into" in bad.stderr
    done = cli("repro", str(run), "--bisect")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "round 1" in done.stderr  # progress lines
    [record] = anpred.load(run).reproducers
    assert record.status == Status.VERIFIED and record.node == "/block2/act/Sigmoid"
    assert record.ops_in_case == 1 and record.minimal and record.ops_in_model == 8
    assert record.case_ratio == pytest.approx(1.0, rel=0.02)  # the drill-down's error again
    assert record.stage_baseline["ops"] == 3 and record.stage_baseline["reproduces"]
    assert record.bisect["reason"].startswith("an injected fault")
    folder = run / "repro" / record.folder
    names = {p.name for p in folder.iterdir()}
    assert {"model.onnx", "inputs.npz", "expected_fp64.npz", "floor.json", "README.md",
            "repro.json", "repro_onnxruntime.py"} <= names  # fmt: skip
    # the folder stands alone: its script, run by hand, shows the error (exit 1)
    alone = subprocess.run([sys.executable, "repro_onnxruntime.py"], cwd=folder,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert alone.returncode == 1 and "REPRODUCED" in alone.stdout
    readme = (folder / "README.md").read_text()
    assert "python repro_onnxruntime.py" in readme and "Verified" in readme
    assert json.loads((folder / "repro.json").read_text())["status"] == "verified"
    # the report links the finding to its reproducer
    report = (run / "report.html").read_text()
    assert f"repro/{record.folder}/README.md" in report
