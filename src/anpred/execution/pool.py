"""Run jobs in worker processes (a local process pool) and collect their symptoms.

A job is a folder of the run store (:class:`~anpred.store.ParticipantStore`) holding its
job file, its ``status`` record and its log, and a module run as ``python -m MODULE JOB``.
Participants are jobs of :mod:`anpred.execution.worker`, run ``parallel`` at a time by
:func:`run_workers` (each also doing stage isolation against the fp64 reference's anchors:
the reference runs before them, or first in line among them, ``reference=``, and they wait
for its captures); the model export is one job run by
:func:`run_job`. A job that crashes, hangs past its timeout, raises, or produces non-finite
values is recorded with its symptom (:class:`~anpred.store.Status`) and step; the other
participants' results are kept.

Where a participant's worker runs is its executor's business
(:mod:`anpred.execution.executor`): child processes of this one by default, or Ray tasks
(``executor=``); either way its folder on the driver ends up holding what it wrote.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from anpred.execution.executor import (
    Executor,
    JobEnd,
    JobSpec,
    LocalExecutor,
    LocalJob,
    RunningJob,
)
from anpred.execution.job import WorkerJob
from anpred.participants import Participant
from anpred.settings import DEFAULT_EXPORT_TIMEOUT, ExecutionSettings  # noqa: F401 (read here)
from anpred.store import ParticipantStore, RunStore, Status

#: Seconds a worker may take to start (imports, load, translate, compile).
DEFAULT_START_TIMEOUT = 900.0
#: Additional seconds allowed per input.
DEFAULT_INPUT_TIMEOUT = 120.0
#: Module of a participant's worker process.
WORKER_MODULE = "anpred.execution.worker"
#: Largest size of JAX's persistent compilation cache (least recently used entries go).
JAX_CACHE_BYTES = 1 << 30

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


def worker_overlay(threads: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables anpred sets for a worker, on top of the caller's environment.

    Thread counts, quiet libraries and JAX's persistent compilation cache under
    ``$ANPRED_CACHE`` (the caller's own setting of those wins), then ``extra``. An executor
    applies them over the environment of whatever process starts the worker (this one, or
    a Ray worker on another node).

    The compilation cache: a jax worker compiles three programs (anchored, plain, stage
    isolation) with XLA, again in every run of the same model (``anpred eval`` runs it
    once per fault); from the cache the same executables load instead. Measured: a jax
    worker (yolov8n, 3 inputs, anchored + plain) took 9.0 CPU seconds, 3.2 with its
    programs from the cache. A cached executable is the one the compilation made (keyed by
    the program, the compile options and the jax version), so the numbers do not change
    (tests/execution/test_executor.py). On a Ray node the path may not exist: jax creates
    it, or warns and compiles.
    """
    env = {
        key: str(threads)
        for key in (
            "OMP_NUM_THREADS",
            "MKL_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "TF_NUM_INTRAOP_THREADS",
            "ANPRED_THREADS",
        )
    }
    for key, default in (
        ("TF_NUM_INTEROP_THREADS", "1"),
        ("TF_CPP_MIN_LOG_LEVEL", "3"),
        ("JAX_PLATFORMS", "cpu"),
        ("GLOG_minloglevel", "2"),
        ("YOLO_OFFLINE", "1"),
        ("PYTHONWARNINGS", "ignore"),
        ("JAX_COMPILATION_CACHE_MAX_SIZE", str(JAX_CACHE_BYTES)),
    ):
        env[key] = os.environ.get(key, default)
    # set to "" by the caller: no cache (jax then compiles every time)
    env["JAX_COMPILATION_CACHE_DIR"] = os.environ.get("JAX_COMPILATION_CACHE_DIR", _jax_cache())
    env.update(extra or {})
    return env


def _jax_cache() -> str:
    from anpred.cache import cache_dir

    return str(cache_dir("jax-compilation"))


def worker_env(threads: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of a worker: the caller's, with thread counts and quiet libraries."""
    return {**os.environ, **worker_overlay(threads, extra)}


def participant_overlay(
    participant: Participant, threads: int, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """:func:`worker_overlay` plus ``participant``'s own variables (see
    :func:`participant_env`).
    """
    return worker_overlay(threads, {**(extra or {}), **participant.environment()})


def participant_env(
    participant: Participant, threads: int, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Environment of ``participant``'s worker: :func:`worker_env` plus its own variables.

    A participant's ``settings["env"]`` (e.g. ``TF_ENABLE_ONEDNN_OPTS=0``) is applied last,
    so it wins over the caller's environment and ``extra``: libraries read such variables
    once, at import, which is why they must be set before the worker starts.
    """
    return {**os.environ, **participant_overlay(participant, threads, extra)}


def start_job(
    folder: ParticipantStore,
    job: Mapping[str, Any],
    module: str,
    env: Mapping[str, str],
    limit: float,
    participant: Participant | None = None,
) -> LocalJob:
    """Write a job file into ``folder`` and start ``python -m module JOB`` on it, here.

    Args:
        folder: The job's folder (created).
        job: The job file's content.
        module: The module that executes it.
        env: The process's whole environment.
        limit: Seconds it may run.
        participant: The participant it runs, if any.
    """
    spec = JobSpec(folder, job, module, {}, limit, participant=participant)
    return LocalJob(spec, env)


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
        item.wait(timeout)
    finally:
        item.stop()
    end = item.collect()
    outcome = item.outcome(end)
    return JobResult(
        status=outcome.status,
        step=outcome.step,
        message=outcome.message,
        record=outcome.record,
        returncode=end.returncode,
        usage_error=bool(outcome.record.get("usage_error")) and outcome.status == Status.ERROR,
        seconds=round(time.monotonic() - started, 2),
    )


def _result(item: RunningJob, end: JobEnd, input_ids: Sequence[str]) -> WorkerResult:
    outcome = item.outcome(end)
    status = outcome.record
    p = item.participant
    assert p is not None
    return WorkerResult(
        participant=p.name,
        library=p.library,
        status=outcome.status,
        step=outcome.step,
        message=outcome.message,
        version=status.get("version", ""),
        settings=status.get("settings", dict(p.settings)),
        timings=status.get("timings", {}),
        returncode=end.returncode,
        inputs_done=len(set(input_ids).intersection(item.folder.finished_inputs())),
        usage_error=bool(status.get("usage_error")) and outcome.status == Status.ERROR,
    )


def run_workers(
    run_dir: Path,
    participants: Sequence[Participant],
    job: Mapping[str, Any],
    input_ids: Sequence[str],
    settings: ExecutionSettings,
    *,
    isolation_source: Path | None = None,
    progress: Progress | None = None,
    reference: Participant | None = None,
    when_idle: Callable[[], None] | None = None,
    on_tail: Callable[[int], None] | None = None,
) -> dict[str, WorkerResult]:
    """Run each participant in its own worker process; return their results by name.

    A job that ends without recording its end (a crash, a timeout) gets its outcome written
    into its status record here, so that a worker waiting for its captures stops waiting.

    Args:
        run_dir: The run directory (captures go to ``captures/<participant>``).
        participants: Who runs.
        job: The common job fields (``model``, ``inputs``).
        input_ids: Inputs, in order.
        settings: How they run (resolved): ``threads`` per worker, ``parallel`` workers at
            the same time (local processes; a Ray cluster schedules by the CPUs each job
            declares), ``timeout`` seconds per worker (default: start allowance +
            per-input allowance), ``env`` extra environment variables of every worker (a
            participant's own ``settings["env"]`` wins over them), ``executor`` where they
            run (default: local processes).
        isolation_source: Capture folder of the fp64 reference, to enable stage isolation.
        progress: Called with (participant, message) as work advances.
        reference: The participant whose captures ``isolation_source`` receives (the fp64
            reference), run at the same time as the others instead of before them: it
            starts first, runs without isolation, and the others wait for its captures
            when they isolate (the executor must share this file system: local processes).
        when_idle: Called once, when the last worker has started (none is left to
            queue): the analysis may get ready while the last workers run.
        on_tail: Called after every poll from then on, with the number of free slots
            (``parallel`` less the workers still running): the analysis may use them for
            inputs every participant has finished (:mod:`anpred.pipeline.early_pass`).
    """
    threads, parallel, env = settings.threads, settings.workers, settings.env
    timeout, executor = settings.timeout, settings.executor
    limit = timeout or DEFAULT_START_TIMEOUT + DEFAULT_INPUT_TIMEOUT * len(input_ids)
    if _SERVING and (executor is None or type(executor) is LocalExecutor):
        executor = _SERVING[-1]  # local processes (the CLI's default): the served ones
    executor = executor or LocalExecutor()
    pending = ([reference] if reference is not None else []) + list(participants)
    running: list[RunningJob] = []
    results: dict[str, WorkerResult] = {}
    notify = progress or (lambda _p, _m: None)
    wanted = set(input_ids)  # the folder may hold other inputs' captures (earlier chunks)
    try:
        while pending or running:
            while pending and len(running) < executor.slots(parallel):
                p = pending.pop(0)
                folder = RunStore(run_dir).participant(p.name).folder
                if p is reference:
                    content = WorkerJob.of(job, p, folder, input_ids, None)
                else:  # the others wait for the reference's captures while it runs
                    waits = reference is not None
                    content = WorkerJob.of(job, p, folder, input_ids, isolation_source, waits)
                spec = _spec(p, run_dir, content, threads, limit, env)
                running.append(executor.start(spec))
                notify(p.name, "started")
                if when_idle is not None and not pending:
                    when_idle()
                    when_idle = None
            time.sleep(0.2)
            for item in list(running):
                assert item.participant is not None
                done = len(wanted.intersection(item.folder.finished_inputs()))  # a chunk's
                if done != item.reported:
                    item.reported = done
                    notify(item.participant.name, f"{done}/{len(input_ids)} inputs")
                if item.poll():
                    result = _result(item, item.collect(), input_ids)
                    _record_end(item.folder, result)
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
            if on_tail is not None and not pending and running:
                on_tail(executor.slots(parallel) - len(running))
    finally:
        # interrupted (Ctrl-C, SIGTERM, an error here): no worker outlives the run
        for item in running:
            item.stop()
    return results


#: The served executors of :func:`served_workers` in effect, innermost last.
_SERVING: list[Executor] = []


@contextmanager
def served_workers() -> Iterator[Executor]:
    """Within it, :func:`run_workers` without an executor runs its workers in served
    processes that outlive one call (:class:`~anpred.execution.served.ServedExecutor`):
    a participant's next job (the next chunk of a run) runs in the same process, on the
    same loaded model. The processes end with the block.
    """
    from anpred.execution.served import ServedExecutor

    with ServedExecutor() as served:
        _SERVING.append(served)
        try:
            yield served
        finally:
            _SERVING.remove(served)


def _record_end(folder: ParticipantStore, result: WorkerResult) -> None:
    """Write a failed job's outcome into its status when the worker could not (killed)."""
    record = folder.read_status()
    if not result.failed or Status.parse(record.get("state"), Status.RUNNING) != Status.RUNNING:
        return
    folder.write_status(
        {**record, "state": result.status, "step": result.step, "message": result.message}
    )


def job_assets(job: Mapping[str, Any]) -> tuple[Path, ...]:
    """The files and folders a worker job reads besides its own folder: the inputs, the
    export's folder, the user's checkpoint and the stage-isolation source (those given).
    """
    model = job.get("model") or {}
    paths = [
        job.get("inputs"),
        (model.get("export") or {}).get("folder"),
        model.get("weights"),
        job.get("isolation_source"),
    ]
    return tuple(Path(p) for p in paths if p and Path(p).exists())


def _spec(
    p: Participant,
    run_dir: Path,
    job: WorkerJob,
    threads: int,
    limit: float,
    env: Mapping[str, str] | None,
) -> JobSpec:
    """A participant's worker job, as its executor starts it."""
    folder = RunStore(run_dir).participant(p.name)
    content = job.to_dict()
    python, runtime_env = participant_python(p)
    return JobSpec(
        folder,
        content,
        WORKER_MODULE,
        participant_overlay(p, threads, {**(env or {}), **runtime_env}),
        limit,
        threads=threads,
        participant=p,
        assets=job_assets(content),
        python=python,
    )


def participant_python(p: Participant) -> tuple[str, dict[str, str]]:
    """The Python that runs ``p``'s worker and the variables it needs for that.

    ``("", {})`` for a library of the main environment. A deployment runtime with its own
    pinned environment runs that environment's Python, with this clone's anpred on
    ``PYTHONPATH`` (anpred is never installed there) and pip kept offline
    (:mod:`anpred.execution.offline` guards the process itself).

    Raises:
        UsageError: The runtime's environment is not built (``make runtimes``).
    """
    from anpred.library import Loads

    library = p.descriptor()  # a release (``onnxruntime@1.17.3``): its own environment
    extra: dict[str, str] = {}
    if library.loads == Loads.CONVERTED_ARTIFACT or p.version:
        from anpred.execution.offline import offline_environment

        extra.update(offline_environment())
    if not library.environment:
        return "", extra
    from anpred.errors import UsageError
    from anpred.library.environments import missing_reason, runtime_env, worker_pythonpath

    env = runtime_env(library.environment)
    if env is None:
        raise UsageError(f"{p.name} cannot run: {missing_reason(library.environment)}")
    return str(env.python), {**extra, "PYTHONPATH": worker_pythonpath()}
