"""Jobs in worker processes: a hung job ends at its timeout with its state and step recorded."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from anpred.errors import JobFailedError
from anpred.execution.executor import JobSpec, LocalExecutor
from anpred.execution.pool import run_job, worker_env
from anpred.pipeline import model_export as run_module
from anpred.settings import RunOptions
from anpred.store import ParticipantStore, RunStore, Status, Step

HERE = Path(__file__).resolve().parent
#: Seconds a job may run in these tests: long enough for a loaded machine to start Python
#: and import anpred.store (measured ~0.3 s here), short enough to keep the test fast.
TIMEOUT = 5.0


@pytest.fixture
def helper_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``hung_job`` importable in child processes (worker_env copies os.environ)."""
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)


def test_a_hung_job_is_killed_at_its_timeout(tmp_path: Path, helper_on_path: None) -> None:
    folder = ParticipantStore(tmp_path / "job")
    started = time.monotonic()
    result = run_job(folder, {"out": str(folder.folder)}, "hung_job", TIMEOUT, worker_env(1))
    assert time.monotonic() - started < TIMEOUT + 10
    assert result.status == Status.TIMEOUT and result.step == Step.EXPORT
    assert result.returncode is not None and result.returncode < 0  # killed, not left running
    assert folder.job_path.exists() and folder.log_path.exists()


def test_a_started_job_replaces_the_status_an_earlier_job_left(
    tmp_path: Path, helper_on_path: None
) -> None:
    """A run's next chunk (or a resumed run) starts a participant's worker in the folder of
    the last one: until the new worker writes its own status (its imports take a while),
    the folder must not say that the job ended, or the early pass would take the
    participant's inputs of the chunk for done without their captures (seen as a
    chunked run whose early pass gave other records than one pass, now and then).
    """
    folder = ParticipantStore(tmp_path / "job").create()
    folder.write_status({"state": Status.OK, "step": Step.DONE, "pid": 1})
    spec = JobSpec(folder, {"out": str(folder.folder)}, "hung_job", {}, TIMEOUT)
    running = LocalExecutor().start(spec)
    try:
        status = folder.read_status()
        assert Status.parse(status.get("state")) == Status.RUNNING and "pid" not in status
    finally:
        running.stop()


def test_a_crashed_job_is_a_crash(tmp_path: Path, helper_on_path: None) -> None:
    folder = ParticipantStore(tmp_path / "job")
    job = {"out": str(folder.folder), "crash": True}
    result = run_job(folder, job, "hung_job", 60, worker_env(1))
    assert result.status == Status.CRASH and result.step == Step.EXPORT
    assert "signal 9" in result.message


def test_a_hung_export_fails_the_run_in_one_line(
    tmp_path: Path, helper_on_path: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_module, "EXPORT_MODULE", "hung_job")
    monkeypatch.setenv("ANPRED_CACHE", str(tmp_path / "cache"))  # no remembered export
    options = RunOptions(model="yolov8n")
    started = time.monotonic()
    with pytest.raises(JobFailedError) as err:
        run_module.export_model(options, tmp_path, lambda _m: None, timeout=TIMEOUT)
    assert time.monotonic() - started < TIMEOUT + 10
    message = str(err.value)
    assert message.startswith(f"export of yolov8n timed out after {TIMEOUT:g} s in step export")
    assert "\n" not in message and err.value.exit_code == 3
    store = RunStore(tmp_path)
    recorded = store.export_job.read_status()
    assert recorded["state"] == "timeout" and recorded["step"] == "export"
    assert not store.has_export()


def test_a_zoo_export_is_remembered_and_exported_again_when_anything_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anpred.interchange.export import AnchoredExport

    monkeypatch.setenv("ANPRED_CACHE", str(tmp_path / "cache"))
    jobs: list[dict] = []

    def export_job(request, folder, label, timeout, env=None) -> AnchoredExport:
        jobs.append(dict(request))
        done = tmp_path / f"export{len(jobs)}"
        done.mkdir()
        for name in ("anchored.onnx", "plain.onnx"):
            (done / name).write_bytes(b"graph")
        return AnchoredExport(done, "images", (1, 3, 32, 32), 17, (), weights_id="seed0")

    monkeypatch.setattr(run_module, "run_export", export_job)

    def export(options: RunOptions, run: str) -> AnchoredExport:
        RunStore.create(tmp_path / run, options.to_dict())
        return run_module.export_model(options, tmp_path / run, lambda _m: None)

    first = export(RunOptions(model="yolov8n"), "a")
    assert export(RunOptions(model="yolov8n"), "b") == first and len(jobs) == 1  # no job
    assert RunStore(tmp_path / "b").read_export() == first.to_dict()
    export(RunOptions(model="yolov8n", seed=1), "c")  # another request: its own export
    assert len(jobs) == 2
    (first.folder / "plain.onnx").unlink()  # the export cache lost it: export again
    assert export(RunOptions(model="yolov8n"), "d").folder == tmp_path / "export3"
    weights = tmp_path / "w.pt"
    weights.write_bytes(b"1")
    export(RunOptions(model="yolov8n", weights=str(weights)), "e")
    weights.write_bytes(b"2")  # the same path with other weights
    export(RunOptions(model="yolov8n", weights=str(weights)), "f")
    assert len(jobs) == 5
    assert run_module.export_memo({"onnx": "m.onnx", "anchors": []}) is None  # a user's file
