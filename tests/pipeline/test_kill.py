"""Kill at any moment (issue 17): SIGKILL ``anpred run`` at random moments and resume; the
resumed run's results equal an uninterrupted run's. SIGKILL a worker: it is recorded as a
crash and the other participants' results are kept.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import anpred, summary

LIBS = "torch,onnxruntime,openvino"
#: Keys of summary.json that hold results (the rest are timings, pids and settings).
RESULTS = ("findings", "deviation", "noise_floor", "baselines", "localization", "anchors")


def _args(model: Path, out: Path) -> list[str]:
    return ["run", str(model), "--libs", LIBS, "--synthetic", "2", "--images", "1",
            "--out", str(out)]


def _rows(run_dir: Path) -> list[dict]:
    rows = pq.read_table(run_dir / "deviations.parquet").to_pylist()
    return sorted(rows, key=lambda r: (r["participant"], r["input"], r["anchor"]))


def _no_orphans(run_dir: Path) -> None:
    """Wait until no worker of ``run_dir`` runs any more (they die with their parent)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        alive = []
        for status in run_dir.glob("captures/*/status.json"):
            try:
                pid = json.loads(status.read_text()).get("pid")
            except (OSError, ValueError):
                continue
            if pid and Path(f"/proc/{pid}").exists():
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                if str(run_dir).encode() in cmdline or b"anpred" in cmdline:
                    alive.append(pid)
        if not alive:
            return
        time.sleep(0.2)
    raise AssertionError(f"workers outlived the killed run: {alive}")


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume_equals_an_uninterrupted_run(
    tiny_onnx: Path, tmp_path: Path
) -> None:
    clean = tmp_path / "clean"
    started = time.monotonic()
    first = anpred(*_args(tiny_onnx, clean))
    full = time.monotonic() - started
    assert first.returncode in (0, 1), first.stderr[-2000:]
    expected = summary(clean)
    rng = random.Random(17)
    trials = 5
    for trial in range(trials):
        out = tmp_path / f"killed{trial}"
        proc = subprocess.Popen([sys.executable, "-m", "anpred", *_args(tiny_onnx, out)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # moments spread over the whole run: export, inputs, workers, analysis, report
        time.sleep(rng.uniform(0.3, 0.95) * full)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        _no_orphans(out)
        resumed = anpred(*_args(tiny_onnx, out))
        assert resumed.returncode == first.returncode, (trial, resumed.stderr[-2000:])
        got = summary(out)
        for key in RESULTS:
            assert json.dumps(got[key], sort_keys=True) == json.dumps(expected[key],
                                                                     sort_keys=True), (trial, key)
        assert _rows(out) == _rows(clean), trial


@pytest.mark.slow
def test_sigkill_of_a_worker_is_a_crash_and_the_others_are_kept(
    tiny_onnx: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "anpred", *_args(tiny_onnx, out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    victim = out / "captures" / "openvino" / "status.json"
    deadline = time.monotonic() + 300
    pid = None
    while pid is None and time.monotonic() < deadline and proc.poll() is None:
        try:
            pid = json.loads(victim.read_text()).get("pid")
        except (OSError, ValueError):
            time.sleep(0.05)
    assert pid, "the openvino worker never started"
    os.kill(pid, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 3, stderr[-2000:]
    by_name = {p["participant"]: p for p in summary(out)["participants"]}
    assert by_name["openvino"]["status"] == "crash"
    assert by_name["torch"]["status"] == by_name["onnxruntime"]["status"] == "ok"
    judged = {r["participant"] for r in _rows(out)}
    assert {"torch", "onnxruntime"} <= judged
