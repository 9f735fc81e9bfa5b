"""Run jobs in worker processes (a local process pool) and collect their symptoms.

A job is a folder of the run store (:class:`~anpred.store.ParticipantStore`) holding its
job file, its ``status`` record and its log, and a module run as ``python -m MODULE JOB``.
Participants are jobs of :mod:`anpred.execution.worker`, run ``parallel`` at a time by
:func:`run_workers` (the fp64 reference first, then the others, each also doing stage
isolation against the reference's anchors); the model export is one job run by
:func:`run_job`. A job that crashes, hangs past its timeout, raises, or produces non-finite
values is recorded with its symptom (:class:`~anpred.store.Status`) and step; the other
participants' results are kept.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from anpred.participants import Participant
from anpred.store import ParticipantStore, RunStore, Status, Step

#: Seconds a worker may take to start (imports, load, translate, compile).
DEFAULT_START_TIMEOUT = 900.0
#: Additional seconds allowed per input.
DEFAULT_INPUT_TIMEOUT = 120.0
#: Seconds the model export may take (``--export-timeout``). Generous on purpose: the limit
#: is not a performance budget, it only ends an export that hangs.
DEFAULT_EXPORT_TIMEOUT = 1800.0
#: Module of a participant's worker process.
WORKER_MODULE = "anpred.execution.worker"

Progress = Callable[[str, str], None]


@dataclass
class WorkerResult:
    """What one participant's worker did."""

    participant: str
    library: str
    status: Status
    step: str = ""
    message: str = ""
    version: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    returncode: int | None = None
    inputs_done: int = 0
    usage_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return asdict(self)

    @property
    def failed(self) -> bool:
        """Crash, timeout or error (non-finite output is a result, not a failure)."""
        return Status.parse(self.status).failed


@dataclass
class JobResult:
    """What one job process did (see :func:`run_job`).

    Attributes:
        status: Its state.
        step: The step it reached (``done``, or where it failed).
        message: Why it failed (one line), if it did.
        record: Its ``status`` record as it last wrote it (``{}`` if it wrote none).
        returncode: The process's exit code (negative: killed by that signal).
        usage_error: It failed on the user's input (an ``AnpredError``), not on a bug.
        seconds: Wall time.
    """

    status: Status
    step: str
    message: str
    record: dict[str, Any]
    returncode: int | None
    usage_error: bool
    seconds: float


def worker_env(threads: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of a worker: the caller's, with thread counts and quiet libraries."""
    env = dict(os.environ)
    for key in (
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "TF_NUM_INTRAOP_THREADS",
    ):
        env[key] = str(threads)
    env["ANPRED_THREADS"] = str(threads)
    env.setdefault("TF_NUM_INTEROP_THREADS", "1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("GLOG_minloglevel", "2")
    env.setdefault("YOLO_OFFLINE", "1")
    env.setdefault("PYTHONWARNINGS", "ignore")
    env.update(extra or {})
    return env


def participant_env(
    participant: Participant, threads: int, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Environment of ``participant``'s worker: :func:`worker_env` plus its own variables.

    A participant's ``settings["env"]`` (e.g. ``TF_ENABLE_ONEDNN_OPTS=0``) is applied last,
    so it wins over the caller's environment and ``extra``: libraries read such variables
    once, at import, which is why they must be set before the worker starts.
    """
    return worker_env(threads, {**(extra or {}), **participant.environment()})


class _Job:
    """A started job process."""

    def __init__(
        self,
        folder: ParticipantStore,
        process: subprocess.Popen[bytes],
        deadline: float,
        log: Any,
        participant: Participant | None = None,
    ) -> None:
        self.folder = folder
        self.process = process
        self.deadline = deadline
        self.log = log
        self.participant = participant
        self.reported = -1
        self.timed_out = False

    def poll(self) -> bool:
        """Whether the process has ended (killed first if it is past its deadline)."""
        if self.process.poll() is None and time.monotonic() > self.deadline:
            self.timed_out = True
            self.stop()
        return self.process.poll() is not None

    def stop(self) -> None:
        """Kill the process if it still runs."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def outcome(self) -> tuple[Status, str, str, dict[str, Any]]:
        """State, step, message and the job's last status record."""
        record = self.folder.read_status()
        code = self.process.returncode
        if self.timed_out:
            state, message = Status.TIMEOUT, "no result before the timeout"
        elif code is not None and code < 0:
            state = Status.CRASH
            message = record.get("killed_for") or f"worker killed by signal {-code}"
        elif code not in (0, None):
            state = Status.ERROR
            message = record.get("message", f"worker exited with code {code}")
        else:
            state, message = Status.parse(record.get("state")), record.get("message", "")
        step = Step.DONE if state == Status.OK else record.get("step", Step.LOAD)
        return state, str(step), message, record


def start_job(
    folder: ParticipantStore,
    job: Mapping[str, Any],
    module: str,
    env: Mapping[str, str],
    limit: float,
    participant: Participant | None = None,
) -> _Job:
    """Write a job file into ``folder`` and start ``python -m module JOB`` on it.

    Args:
        folder: The job's folder (created).
        job: The job file's content.
        module: The module that executes it.
        env: The process's environment.
        limit: Seconds it may run.
        participant: The participant it runs, if any.
    """
    job_file = folder.create().write_job(job)
    log = folder.open_log()
    process = subprocess.Popen(
        [sys.executable, "-m", module, str(job_file)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(env),
    )
    return _Job(folder, process, time.monotonic() + limit, log, participant)


def run_job(
    folder: ParticipantStore,
    job: Mapping[str, Any],
    module: str,
    timeout: float,
    env: Mapping[str, str],
) -> JobResult:
    """Run one job process to its end, or until ``timeout`` seconds have passed.

    The process is killed on timeout and when this is interrupted (Ctrl-C, SIGTERM).
    """
    started = time.monotonic()
    item = start_job(folder, job, module, env, timeout)
    try:
        try:
            item.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            item.timed_out = True
    finally:
        item.stop()
        item.log.close()
    state, step, message, record = item.outcome()
    return JobResult(
        status=state,
        step=step,
        message=message,
        record=record,
        returncode=item.process.returncode,
        usage_error=bool(record.get("usage_error")) and state == Status.ERROR,
        seconds=round(time.monotonic() - started, 2),
    )


def _result(running: _Job, n_inputs: int) -> WorkerResult:
    state, step, message, status = running.outcome()
    p = running.participant
    assert p is not None
    return WorkerResult(
        participant=p.name,
        library=p.library,
        status=state,
        step=step,
        message=message,
        version=status.get("version", ""),
        settings=status.get("settings", dict(p.settings)),
        timings=status.get("timings", {}),
        returncode=running.process.returncode,
        inputs_done=min(len(running.folder.finished_inputs()), n_inputs),
        usage_error=bool(status.get("usage_error")) and state == Status.ERROR,
    )


def run_workers(
    run_dir: Path,
    participants: Sequence[Participant],
    job: Mapping[str, Any],
    input_ids: Sequence[str],
    threads: int = 1,
    parallel: int = 1,
    isolation_source: Path | None = None,
    timeout: float | None = None,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, WorkerResult]:
    """Run each participant in its own worker process; return their results by name.

    Args:
        run_dir: The run directory (captures go to ``captures/<participant>``).
        participants: Who runs.
        job: The common job fields (``model``, ``inputs``).
        input_ids: Inputs, in order.
        threads: Threads per worker.
        parallel: Workers running at the same time.
        isolation_source: Capture folder of the fp64 reference, to enable stage isolation.
        timeout: Seconds per worker (default: start allowance + per-input allowance).
        progress: Called with (participant, message) as work advances.
        env: Extra environment variables for every worker (a participant's own
            ``settings["env"]`` wins over them).
    """
    limit = timeout or DEFAULT_START_TIMEOUT + DEFAULT_INPUT_TIMEOUT * len(input_ids)
    pending = list(participants)
    running: list[_Job] = []
    results: dict[str, WorkerResult] = {}
    notify = progress or (lambda _p, _m: None)
    try:
        while pending or running:
            while pending and len(running) < max(1, parallel):
                p = pending.pop(0)
                running.append(
                    _start(p, run_dir, job, input_ids, threads, isolation_source, limit, env)
                )
                notify(p.name, "started")
            time.sleep(0.2)
            for item in list(running):
                assert item.participant is not None
                done = len(item.folder.finished_inputs())
                if done != item.reported:
                    item.reported = done
                    notify(item.participant.name, f"{done}/{len(input_ids)} inputs")
                if item.poll():
                    item.log.close()
                    result = _result(item, len(input_ids))
                    results[item.participant.name] = result
                    running.remove(item)
                    notify(
                        item.participant.name,
                        f"{result.status}"
                        + (
                            f" at {result.step}: {result.message}"
                            if result.status != Status.OK
                            else ""
                        ),
                    )
    finally:
        # interrupted (Ctrl-C, SIGTERM, an error here): no worker outlives the run
        for item in running:
            item.stop()
            item.log.close()
    return results


def _start(
    p: Participant,
    run_dir: Path,
    job: Mapping[str, Any],
    input_ids: Sequence[str],
    threads: int,
    isolation_source: Path | None,
    limit: float,
    env: Mapping[str, str] | None,
) -> _Job:
    """Write a participant's job file and start its worker process."""
    folder = RunStore(run_dir).participant(p.name)
    return start_job(
        folder,
        {
            **job,
            "participant": p.to_dict(),
            "out": str(folder.folder),
            "input_ids": list(input_ids),
            "isolation_source": str(isolation_source or "") or None,
        },
        WORKER_MODULE,
        participant_env(p, threads, env),
        limit,
        participant=p,
    )
