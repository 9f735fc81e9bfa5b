"""Run participants in worker processes (a local process pool) and collect their symptoms.

The fp64 reference runs first; the other participants then run ``parallel`` at a time,
each also doing stage isolation against the reference's anchors. A worker that crashes,
hangs past its timeout, raises, or produces non-finite values is recorded with its symptom
and step; the other participants' results are kept.
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

from anpred.execution.layout import participant_dir, read_json, write_json
from anpred.participants import Participant

#: Seconds a worker may take to start (imports, load, translate, compile).
DEFAULT_START_TIMEOUT = 900.0
#: Additional seconds allowed per input.
DEFAULT_INPUT_TIMEOUT = 120.0

Progress = Callable[[str, str], None]


@dataclass
class WorkerResult:
    """What one participant's worker did."""

    participant: str
    library: str
    status: str
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
        return self.status in ("crash", "timeout", "error")


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


class _Running:
    def __init__(
        self,
        participant: Participant,
        folder: Path,
        process: subprocess.Popen[bytes],
        deadline: float,
        log: Any,
    ) -> None:
        self.participant = participant
        self.folder = folder
        self.process = process
        self.deadline = deadline
        self.log = log
        self.reported = -1


def _count_done(folder: Path) -> int:
    return len(list(folder.glob("*.capture.json")))


def _result(running: _Running, timed_out: bool, n_inputs: int) -> WorkerResult:
    status_path = running.folder / "status.json"
    status = read_json(status_path) if status_path.exists() else {}
    code = running.process.returncode
    p = running.participant
    if timed_out:
        state, message = "timeout", "no result before the timeout"
    elif code is not None and code < 0:
        state, message = "crash", f"worker killed by signal {-code}"
    elif code not in (0, None):
        state, message = "error", status.get("message", f"worker exited with code {code}")
    else:
        state, message = status.get("state", "error"), status.get("message", "")
    return WorkerResult(
        participant=p.name,
        library=p.library,
        status=state,
        step=status.get("step", "load") if state != "ok" else "done",
        message=message,
        version=status.get("version", ""),
        settings=status.get("settings", dict(p.settings)),
        timings=status.get("timings", {}),
        returncode=code,
        inputs_done=min(_count_done(running.folder), n_inputs),
        usage_error=bool(status.get("usage_error")) and state == "error",
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
    running: list[_Running] = []
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
                done = _count_done(item.folder)
                if done != item.reported:
                    item.reported = done
                    notify(item.participant.name, f"{done}/{len(input_ids)} inputs")
                timed_out = item.process.poll() is None and time.monotonic() > item.deadline
                if timed_out:
                    item.process.kill()
                    item.process.wait()
                if item.process.poll() is not None:
                    item.log.close()
                    result = _result(item, timed_out, len(input_ids))
                    results[item.participant.name] = result
                    running.remove(item)
                    notify(
                        item.participant.name,
                        f"{result.status}"
                        + (f" at {result.step}: {result.message}" if result.status != "ok" else ""),
                    )
    finally:
        # interrupted (Ctrl-C, SIGTERM, an error here): no worker outlives the run
        for item in running:
            if item.process.poll() is None:
                item.process.kill()
                item.process.wait()
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
) -> _Running:
    """Write a participant's job file and start its worker process."""
    folder = participant_dir(run_dir, p.name)
    folder.mkdir(parents=True, exist_ok=True)
    job_file = folder / "job.json"
    write_json(
        job_file,
        {
            **job,
            "participant": p.to_dict(),
            "out": str(folder),
            "input_ids": list(input_ids),
            "isolation_source": str(isolation_source or "") or None,
        },
    )
    log = open(folder / "worker.log", "ab")  # noqa: SIM115 - closed when it ends
    process = subprocess.Popen(
        [sys.executable, "-m", "anpred.execution.worker", str(job_file)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=participant_env(p, threads, env),
    )
    return _Running(p, folder, process, time.monotonic() + limit, log)
