"""End to end: ``anpred run`` on a user's ONNX file, symptoms, resume, report, exit codes.

Symptoms come from the test suite's own transform kind (``symptoms.py``), passed to
``anpred run`` as ``RunOptions.extra["transforms"]`` by ``run_failing.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from conftest import RUN_FAILING, anpred, failing, summary

LIBS = "torch,onnxruntime,jax"


def test_run_user_onnx_end_to_end(tiny_onnx, tmp_path) -> None:
    out = tmp_path / "run"
    proc = anpred("run", str(tiny_onnx), "--libs", LIBS, "--images", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = summary(out)
    for key in (
        "model",
        "participants",
        "anchors",
        "findings",
        "localization",
        "characterization",
        "baselines",
        "noise_floor",
    ):
        assert key in s
    assert [a["key"] for a in s["anchors"]] == ["r1", "s2", "output"]  # inferred from scopes
    assert {p["participant"] for p in s["participants"]} == {"torch", "onnxruntime", "jax"}
    assert all(p["status"] == "ok" for p in s["participants"])
    assert s["findings"] == []
    rows = pq.read_table(out / "deviations.parquet").to_pylist()
    assert len(rows) == 3 * 2 * 3  # participants x inputs x anchors
    assert all(r["rel_l2"] < 1e-5 for r in rows)  # clean fp32: same graph, fp32 noise only
    # Observer effect is measured for everyone. jax under jit fuses differently when anchors
    # are graph outputs (measured: 1 ulp, 1.2e-7, on this model) -- recorded, not hidden.
    observer = {p["participant"]: p["observer"] for p in s["participants"]}
    assert observer["torch"]["identical"] and observer["onnxruntime"]["identical"]
    assert observer["jax"]["inputs"] == 2 and observer["jax"]["max_abs_diff"] < 1e-5
    from anpred.machine import describe_machine

    assert s["machine"] == describe_machine()  # where the numbers came from, recorded
    assert (out / "report.html").exists()
    assert "torch" in proc.stdout and "onnxruntime" in proc.stdout
    again = anpred("report", str(out))
    assert again.returncode == 0, again.stderr[-2000:]


def test_crash_keeps_others_and_resume_matches_clean_run(tiny_onnx, tmp_path) -> None:
    clean = tmp_path / "clean"
    assert anpred("run", str(tiny_onnx), "--libs", LIBS, "--out", str(clean)).returncode == 0
    out = tmp_path / "crashy"
    # a transient crash: the same command (same run.json) resumes, and jax then runs
    crash_once = f"jax:crash:{tmp_path / 'crashed-once'}"
    crashed = failing(crash_once, str(tiny_onnx), "--libs", LIBS, "--out", str(out))
    assert crashed.returncode == 3, crashed.stderr[-2000:]
    by_name = {p["participant"]: p for p in summary(out)["participants"]}
    assert by_name["jax"]["status"] == "crash" and by_name["jax"]["step"] == "execute"
    assert by_name["torch"]["status"] == by_name["onnxruntime"]["status"] == "ok"
    assert len(list((out / "captures" / "onnxruntime").glob("*.capture.npz"))) == 2
    resumed = failing(crash_once, str(tiny_onnx), "--libs", LIBS, "--out", str(out))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "[torch] already done (resumed)" in resumed.stderr
    a, b = summary(clean), summary(out)
    for key in ("findings", "deviation", "noise_floor", "baselines", "localization"):
        assert json.dumps(a[key], sort_keys=True) == json.dumps(b[key], sort_keys=True), key


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [("hang", "timeout", 3), ("error", "error", 3), ("nan", "non-finite", 1)],
)
def test_symptoms_are_recorded(tiny_onnx, tmp_path, fault, status, code) -> None:
    out = tmp_path / fault
    proc = failing(
        f"onnxruntime:{fault}",
        str(tiny_onnx),
        "--libs",
        "torch,onnxruntime",
        "--out",
        str(out),
        "--timeout",
        "60",
        "--images",
        "1",
    )
    assert proc.returncode == code, proc.stderr[-2000:]
    by_name = {p["participant"]: p for p in summary(out)["participants"]}
    assert by_name["onnxruntime"]["status"] == status
    assert by_name["torch"]["status"] == "ok"
    if fault == "nan":  # non-finite output where fp64 is finite is always a finding
        findings = summary(out)["findings"]
        assert {(f["participant"], f["anchor"]) for f in findings} == {("onnxruntime", "output")}


def test_resume_with_other_settings_is_refused(tiny_onnx, tmp_path) -> None:
    out = tmp_path / "run"
    assert (
        anpred(
            "run", str(tiny_onnx), "--libs", "torch,onnxruntime", "--images", "1", "--out", str(out)
        ).returncode
        == 0
    )
    proc = anpred(
        "run", str(tiny_onnx), "--libs", "torch,onnxruntime", "--images", "2", "--out", str(out)
    )
    assert proc.returncode == 2 and "other settings" in proc.stderr


def test_terminating_anpred_stops_its_workers(tiny_onnx, tmp_path) -> None:
    """SIGTERM to anpred (like Ctrl-C) stops the running workers; none is left behind."""
    import signal
    import time

    out = tmp_path / "term"
    proc = subprocess.Popen(
        [sys.executable, str(RUN_FAILING), "onnxruntime:hang", str(tiny_onnx),
         "--libs", "torch,onnxruntime", "--images", "1", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    status = out / "captures" / "onnxruntime" / "status.json"
    deadline = time.monotonic() + 300
    worker = None
    while worker is None and time.monotonic() < deadline:
        time.sleep(0.5)
        try:
            worker = json.loads(status.read_text()).get("pid")
        except (OSError, ValueError):
            continue
    assert worker is not None, "the onnxruntime worker never started"
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in stderr
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)


def test_a_worker_over_the_memory_budget_is_a_recorded_crash(tiny_onnx, tmp_path) -> None:
    """A participant whose library allocates without end is stopped at the budget and
    recorded; the others' results are kept. 3 GB: on this model the torch workers peak at
    about 0.9 GB of VmRSS, onnxruntime's at 0.09 GB (measured); the hog goes to 6 GB."""
    out = tmp_path / "hog"
    proc = failing(
        "onnxruntime:hog",
        str(tiny_onnx),
        "--libs",
        "torch,onnxruntime",
        "--images",
        "1",
        "--max-memory",
        "3G",
        "--out",
        str(out),
    )
    assert proc.returncode == 3, proc.stderr[-2000:]
    by_name = {p["participant"]: p for p in summary(out)["participants"]}
    assert by_name["onnxruntime"]["status"] == "crash"
    assert "out of memory" in by_name["onnxruntime"]["message"]
    assert "3.0 GB" in by_name["onnxruntime"]["message"]
    assert by_name["torch"]["status"] == "ok"


def test_a_memory_bomb_is_refused_before_allocating(tmp_path) -> None:
    """An input declared 1x3x100000x100000 (120 GB of float32) is refused in one line."""
    import onnx
    from tiny_model import tiny_cnn

    model = onnx.load(str(tiny_cnn(tmp_path / "tiny.onnx")))
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_value = dims[3].dim_value = 100000
    bomb = tmp_path / "bomb.onnx"
    onnx.save(model, str(bomb))
    proc = anpred(
        "run",
        str(bomb),
        "--libs",
        "onnxruntime",
        "--max-memory",
        "8G",
        "--out",
        str(tmp_path / "out"),
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "would need at least" in last and "over the budget of 8.0 GB" in last
    assert "Traceback" not in proc.stderr
