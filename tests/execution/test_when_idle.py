"""The pool says when its tail begins (the last worker has started), and how many slots
are free in it."""

from __future__ import annotations

from pathlib import Path

from anpred.execution.executor import Executor, JobEnd, JobSpec, RunningJob
from anpred.execution.pool import run_workers
from anpred.participants import parse_participants
from anpred.settings import ExecutionSettings
from anpred.store import Status

#: The fields every worker of a run shares (nothing reads them here: the jobs are fakes).
_JOB = {"model": {}, "inputs": "inputs.npz"}

class _Job(RunningJob):
    """Ends after ``polls`` polls; writes the ok status a worker would."""

    def __init__(self, spec: JobSpec, polls: int, log: list[str]) -> None:
        super().__init__(spec)
        self.left, self.log = polls, log

    def poll(self) -> bool:
        self.left -= 1
        if self.left <= 0:
            self.folder.write_status({"state": Status.OK, "step": "done"})
            self.log.append(f"end {self.participant.name}")
        return self.left <= 0

    def stop(self) -> None:
        pass

    def collect(self) -> JobEnd:
        return JobEnd(0)


class _Executor(Executor):
    def __init__(self, polls: dict[str, int], log: list[str]) -> None:
        self.polls, self.log = polls, log

    def start(self, spec: JobSpec) -> RunningJob:
        self.log.append(f"start {spec.participant.name}")
        spec.folder.create()
        return _Job(spec, self.polls[spec.participant.name], self.log)

    def slots(self, parallel: int) -> int:
        return parallel


def test_when_idle_is_called_once_when_the_tail_begins(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("anpred.execution.pool.time.sleep", lambda _s: None)
    log: list[str] = []
    participants = parse_participants("torch,onnxruntime,openvino")
    executor = _Executor({"torch": 1, "onnxruntime": 3, "openvino": 2}, log)
    results = run_workers(
        tmp_path, participants, _JOB, ["x"], ExecutionSettings(parallel=2, executor=executor),
        when_idle=lambda: log.append("idle"),
    )  # fmt: skip
    assert all(r.status == Status.OK for r in results.values())
    # torch ends first, openvino takes its slot: the queue is empty, the tail begins
    assert log == [
        "start torch", "start onnxruntime", "end torch", "start openvino", "idle",
        "end onnxruntime", "end openvino",
    ]  # fmt: skip


def test_on_tail_is_told_the_free_slots_after_every_poll_of_the_tail(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr("anpred.execution.pool.time.sleep", lambda _s: None)
    log: list[str] = []
    participants = parse_participants("torch,onnxruntime,openvino")
    executor = _Executor({"torch": 1, "onnxruntime": 3, "openvino": 4}, log)
    run_workers(
        tmp_path, participants, _JOB, ["x"], ExecutionSettings(parallel=2, executor=executor),
        on_tail=lambda free: log.append(f"free {free}"),
    )  # fmt: skip
    # nothing while a worker waits to start; then every poll, as long as one runs
    assert log == [
        "start torch", "start onnxruntime", "end torch", "start openvino", "free 0",
        "end onnxruntime", "free 1", "free 1", "end openvino",
    ]  # fmt: skip
