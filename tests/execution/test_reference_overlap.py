"""The fp64 reference runs with the other workers: they wait for its captures to isolate.

Unit tests of the worker's wait (a thread plays the reference), of the pool recording how a
killed job ended, and one slow end-to-end check that a run whose reference overlaps the
others isolates every input exactly as a run whose reference ran first.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from anpred.execution.executor import Executor, JobSpec, LocalExecutor, RunningJob
from anpred.execution.job import REFERENCE_RUNNING
from anpred.execution.pool import WorkerResult, _record_end
from anpred.execution.worker import OBSERVER_INPUTS, Worker
from anpred.store import ISOLATED, PLAIN_KEY, ParticipantStore, RunStore, Status

HERE = Path(__file__).resolve().parent


def _worker(tmp_path: Path, running: bool) -> tuple[Worker, ParticipantStore]:
    reference = ParticipantStore(tmp_path / "reference").create()
    reference.write_status({"state": Status.RUNNING})
    job = {
        "model": {},
        "inputs": str(tmp_path / "inputs.npz"),
        "input_ids": [],
        "out": str(tmp_path / "participant"),
        "participant": {"name": "p", "library": "onnxruntime", "settings": {}},
        "isolation_source": str(reference.folder),
        **({REFERENCE_RUNNING: True} if running else {}),
    }
    path = ParticipantStore(tmp_path / "jobs").create().write_job(job)
    return Worker(path), reference


def _later(seconds: float, action) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_worker_waits_for_a_capture_the_running_reference_writes_later(
    tmp_path: Path,
) -> None:
    worker, reference = _worker(tmp_path, running=True)
    anchors = {"a": np.arange(4.0), "output": np.ones(3)}
    writer = _later(
        0.3, lambda: reference.write_capture("x", {**anchors, PLAIN_KEY: np.ones(3)}, {})
    )
    got = worker._reference_capture("x", wait=True)
    writer.join()
    assert got is not None and set(got) == {"a", "output"}  # the plain output is not fed
    np.testing.assert_array_equal(got["a"], anchors["a"])
    assert worker.waited >= 0.25


def test_a_worker_stops_waiting_when_the_reference_ended_without_the_capture(
    tmp_path: Path,
) -> None:
    worker, reference = _worker(tmp_path, running=True)
    killer = _later(0.3, lambda: reference.write_status({"state": Status.CRASH}))
    started = time.monotonic()
    assert worker._reference_capture("x", wait=True) is None
    killer.join()
    assert 0.25 <= time.monotonic() - started < 10


def test_without_a_running_reference_a_missing_capture_is_not_waited_for(
    tmp_path: Path,
) -> None:
    worker, _ = _worker(tmp_path, running=False)  # the reference ran before: never comes
    started = time.monotonic()
    assert worker._reference_capture("x", wait=True) is None
    assert time.monotonic() - started < 1 and worker.waited == 0.0


def test_the_pool_records_how_a_killed_job_ended_and_keeps_what_a_worker_recorded(
    tmp_path: Path,
) -> None:
    killed = ParticipantStore(tmp_path / "killed").create()
    killed.write_status({"state": Status.RUNNING, "step": "execute", "pid": 1})
    _record_end(killed, WorkerResult("k", "torch", Status.CRASH, "execute", "signal 9"))
    assert killed.read_status() == {
        "state": "crash", "step": "execute", "pid": 1, "message": "signal 9",
    }  # fmt: skip
    failed = ParticipantStore(tmp_path / "failed").create()
    failed.write_status({"state": Status.ERROR, "message": "its own words"})
    _record_end(failed, WorkerResult("f", "torch", Status.ERROR, "load", "exit code 1"))
    assert failed.read_status()["message"] == "its own words"


def _tiny_onnx(path: Path) -> Path:
    source = HERE.parent / "pipeline" / "tiny_model.py"
    spec = importlib.util.spec_from_file_location("tiny_model", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.tiny_cnn(path)


class _Elsewhere(Executor):
    """Local processes behind an executor not known to share this file system: the run
    then runs its fp64 reference before the others, as it does on Ray."""

    def __init__(self) -> None:
        self.local = LocalExecutor()

    def start(self, spec: JobSpec) -> RunningJob:
        return self.local.start(spec)

    def slots(self, parallel: int) -> int:
        return self.local.slots(parallel)


@pytest.mark.slow
def test_an_overlapping_reference_isolates_every_input_as_a_reference_run_first(
    tmp_path: Path,
) -> None:
    from anpred.participants import REFERENCE64, parse_participants
    from anpred.pipeline.execute import execute
    from anpred.pipeline.model_export import export_model
    from anpred.pipeline.run_inputs import prepare_inputs
    from anpred.settings import ExecutionSettings, RunOptions

    model = _tiny_onnx(tmp_path / "tiny.onnx")
    inputs = OBSERVER_INPUTS + 1
    isolated = {}
    for name, executor in (("overlap", None), ("first", _Elsewhere())):
        out = tmp_path / name
        options = RunOptions(model=str(model), libs=("onnxruntime",), images=inputs)
        RunStore.create(out, options.to_dict())
        export = export_model(options, out, lambda _m: None)
        ids = prepare_inputs(options, out, export, None, None)
        participants = parse_participants("torch,onnxruntime")
        settings = ExecutionSettings(parallel=2, executor=executor, say=lambda _m: None)
        results = execute(options, out, participants, export, ids, settings)
        assert [r.status for r in results.values()] == [Status.OK] * 3, results
        assert list(results) == [REFERENCE64, "torch", "onnxruntime"]
        store = RunStore(out).participant("onnxruntime")
        assert store.finished_inputs(ISOLATED) == sorted(ids)  # none skipped while it ran
        isolated[name] = {i: store.load_capture(i, ISOLATED) for i in ids}
        plain = [PLAIN_KEY in store.load_capture(i) for i in ids]
        assert plain == [True] * OBSERVER_INPUTS + [False]  # the observer check's sample
        reference = RunStore(out).participant(REFERENCE64)  # not judged: no plain model
        assert not any(PLAIN_KEY in reference.load_capture(i) for i in ids)
    for input_id, arrays in isolated["overlap"].items():
        for key, value in arrays.items():
            np.testing.assert_array_equal(value, isolated["first"][input_id][key])


@pytest.mark.slow
def test_a_crashed_reference_stops_the_waiting_workers_and_the_run_ends(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    model = _tiny_onnx(tmp_path / "tiny.onnx")
    out = tmp_path / "run"
    run_failing = HERE.parent / "pipeline" / "run_failing.py"
    args = [str(model), "--libs", "torch,onnxruntime", "--images", "2", "--out", str(out)]
    proc = subprocess.run([sys.executable, str(run_failing), "torch[fp64]:crash", *args],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 3, proc.stderr[-2000:]  # a participant failed: the reference
    captures = out / "captures"
    assert json.loads((captures / "torch_fp64" / "status.json").read_text())["state"] == "crash"
    ort = json.loads((captures / "onnxruntime" / "status.json").read_text())
    assert ort["state"] == "ok" and ort["timings"]["reference_wait"] < 300  # not to a timeout
    assert not list((captures / "onnxruntime").glob("*.isolated.npz"))  # nothing to isolate
