"""Executors: where a worker job runs. Local processes by default, or Ray tasks.

A job is a folder of the run store (:class:`~anpred.store.ParticipantStore`) and a module
run as ``python -m MODULE JOB`` on the job file written into it. An :class:`Executor`
starts a job (:class:`JobSpec`) and hands back a :class:`RunningJob`, which the pool
(:func:`anpred.execution.pool.run_workers`) polls, stops, and finally collects: after
:meth:`RunningJob.collect`, the job's folder on the driver holds everything the worker
wrote (captures, status record, log), wherever it ran. The driver's run store stays the
single source of truth; the outcome of a job (:func:`job_outcome`) is read from it, the same
way for every executor.

:class:`LocalExecutor` (the default) runs each job in a child process of this one; the Ray
executor (:mod:`anpred.execution.ray_executor`, imported only when asked for) runs it in a
Ray task on any node of a cluster.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from anpred.participants import Participant
from anpred.store import ParticipantStore, Status, Step


@dataclass(frozen=True)
class JobSpec:
    """One job, as the pool hands it to an executor.

    Attributes:
        folder: The job's folder in the driver's run store.
        job: The job file's content (paths as the driver sees them).
        module: The module that executes it (``python -m module JOB``).
        env: Environment variables anpred sets for the job, on top of the environment of
            the process that starts it (:func:`anpred.execution.pool.worker_overlay`).
        limit: Seconds it may run once started.
        threads: Threads it uses (the CPUs an executor reserves for it).
        participant: The participant it runs, if any.
        assets: Files and folders outside ``folder`` that the job reads (its inputs, the
            model's export folder, ...): an executor without a shared file system ships
            them and rewrites their paths in the job.
        python: The Python that runs it; ``""``: the one running anpred
            (``sys.executable``). A deployment runtime's own pinned environment
            (:mod:`anpred.library.environments`) gives its Python here.
    """

    folder: ParticipantStore
    job: Mapping[str, Any]
    module: str
    env: Mapping[str, str]
    limit: float
    threads: int = 1
    participant: Participant | None = None
    assets: tuple[Path, ...] = ()
    python: str = ""

    @property
    def command(self) -> list[str]:
        """``python -m module`` (the job file's path follows)."""
        return [self.python or sys.executable, "-m", self.module]


@dataclass(frozen=True)
class JobEnd:
    """How a job's process ended.

    Attributes:
        returncode: Its exit code (negative: killed by that signal; ``None``: unknown).
        timed_out: It was killed because it ran past its limit.
        lost: Why the executor lost it (e.g. the cluster gave up on it): no outcome of the
            job itself, nothing written to its folder; empty when it ran to an end.
        where: Where it ran (a host name), for messages.
    """

    returncode: int | None
    timed_out: bool = False
    lost: str = ""
    where: str = ""


@dataclass(frozen=True)
class JobOutcome:
    """A finished job's state, step, message and last status record."""

    status: Status
    step: str
    message: str
    record: dict[str, Any] = field(default_factory=dict)


def job_outcome(record: Mapping[str, Any], end: JobEnd) -> JobOutcome:
    """The outcome of a job from its status record and how its process ended.

    Timeout, crash (killed by a signal; the record may say why, e.g. out of memory),
    error (a non-zero exit: the record's message) or the state the worker recorded.
    """
    code = end.returncode
    if end.lost:
        state, message = Status.ERROR, end.lost
    elif end.timed_out:
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
    return JobOutcome(state, str(step), message, dict(record))


class RunningJob(ABC):
    """A started job: poll it until it ends, then collect it (or stop it)."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        #: Inputs done at the last progress message (the pool's bookkeeping).
        self.reported = -1

    @property
    def folder(self) -> ParticipantStore:
        """The job's folder on the driver."""
        return self.spec.folder

    @property
    def participant(self) -> Participant | None:
        """The participant it runs, if any."""
        return self.spec.participant

    @abstractmethod
    def poll(self) -> bool:
        """Whether the job has ended (stopped first if it is past its limit)."""

    @abstractmethod
    def stop(self) -> None:
        """End the job if it still runs (interrupted run); keep what it wrote so far."""

    @abstractmethod
    def collect(self) -> JobEnd:
        """After :meth:`poll` said it ended: bring its files into its folder on the driver
        (if they are not there already) and say how it ended.
        """

    def outcome(self, end: JobEnd) -> JobOutcome:
        """The job's outcome, read from its folder on the driver (call after collect)."""
        return job_outcome(self.folder.read_status(), end)


class Executor(ABC):
    """Runs jobs; a context manager that releases what it holds (processes, a cluster)."""

    @abstractmethod
    def start(self, spec: JobSpec) -> RunningJob:
        """Start ``spec``'s job (create its folder and write its job file)."""

    @abstractmethod
    def slots(self, parallel: int) -> int:
        """How many jobs the pool keeps started at once when ``parallel`` were asked for."""

    def close(self) -> None:  # noqa: B027 - optional hook: nothing to release by default
        """Release what the executor holds."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class LocalJob(RunningJob):
    """A job in a child process of this one, writing straight into its folder."""

    def __init__(self, spec: JobSpec, env: Mapping[str, str]) -> None:
        super().__init__(spec)
        job_file = spec.folder.start_job(spec.job)
        self.log: IO[bytes] = spec.folder.open_log()
        self.process = subprocess.Popen(
            [*spec.command, str(job_file)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=dict(env),
        )
        self.deadline = time.monotonic() + spec.limit
        self.timed_out = False

    def poll(self) -> bool:
        if self.process.poll() is None and time.monotonic() > self.deadline:
            self.timed_out = True
            self.stop()
        return self.process.poll() is not None

    def wait(self, timeout: float) -> None:
        """Block until the process ends or ``timeout`` seconds passed (then stop it)."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.timed_out = True
        self.stop()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.log.close()

    def collect(self) -> JobEnd:
        self.log.close()
        return JobEnd(self.process.returncode, self.timed_out)


class LocalExecutor(Executor):
    """Each job in a child process of this one (the default; see :mod:`.pool`).

    The job's environment is this process's with the spec's variables on top.
    """

    def start(self, spec: JobSpec) -> LocalJob:
        return LocalJob(spec, {**os.environ, **spec.env})

    def slots(self, parallel: int) -> int:
        return max(1, parallel)
