"""The export runs as a job: a hung export ends the run with exit 3 and one line, promptly;
a bad request stays a one-line usage error; a rerun resumes with a fresh export job."""

from __future__ import annotations

import json
import time

from conftest import anpred


def test_an_export_past_its_timeout_ends_the_run_in_one_line(tiny_onnx, tmp_path) -> None:
    out = tmp_path / "run"
    started = time.monotonic()
    # 0.05 s: the export process is killed before it can finish (starting Python and
    # importing anpred alone takes longer), as a hung export would be after 1800 s.
    args = ("run", str(tiny_onnx), "--libs", "torch", "--images", "1", "--out", str(out))
    proc = anpred(*args, "--export-timeout", "0.05")
    assert time.monotonic() - started < 120
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("anpred: ")]
    assert len(errors) == 1, proc.stderr
    assert errors[0].startswith("anpred: error: export of ")
    assert "tiny.onnx timed out after 0.05 s in step " in errors[0]
    status = json.loads((out / "export" / "status.json").read_text())
    assert status["state"] == "timeout" and status["message"] == "no result before the timeout"
    assert not (out / "model.json").exists()

    # the same command with the default timeout resumes the run: the export job runs again
    proc = anpred(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    status = json.loads((out / "export" / "status.json").read_text())
    assert status["state"] == "ok" and status["step"] == "done"
    assert status["export"] == json.loads((out / "model.json").read_text())
    assert json.loads((out / "store.json").read_text()) == {"format": 2}


def test_a_bad_export_request_is_a_usage_error(tiny_onnx, tmp_path) -> None:
    proc = anpred(
        "run", str(tiny_onnx), "--libs", "torch", "--anchors", "nosuch", "--out", str(tmp_path)
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("anpred: ")]
    assert errors == [
        "anpred: error: no tensor named nosuch in tiny.onnx; --anchors takes tensor names of "
        "the graph"
    ]
