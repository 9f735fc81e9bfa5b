"""Served workers: one process runs many worker jobs of one participant, one after another.

A campaign (``anpred eval``) runs one faulty participant per fault run, many times over
for the same library and model. Started afresh for each, a worker pays its interpreter,
anpred's and its library's imports every time (a TensorFlow worker's imports alone take
3-6 s, ``benchmarks/bench_imports.py``). :class:`ServedExecutor` instead keeps one
process per worker environment (the same Python, the same variables: one participant's
library and settings) and hands it the jobs one at a time: the process runs each job as
:mod:`anpred.execution.worker` would (:class:`~anpred.execution.worker.Worker`, same job
file, same folder, same status record and log), then waits for the next.

**Crash-safe.** A job that crashes its process (a signal, the memory watchdog), hangs past
its limit (the process is killed) or ends the process without a word is recorded as that
job's crash or timeout, exactly as a fresh worker's would be (the pool records its end);
only the job in flight is lost. The next job gets a fresh process.

**Runners kept.** A job of the same participant, model and transforms as the process's
previous one (the next chunk of a run, ``--chunk``) runs on the previous job's runner:
the model is not loaded, translated and compiled again
(:class:`~anpred.execution.worker.Worker`'s ``kept``). A fault run's transforms differ
from the last one's, so its runner is new (its imports are what it saves).

**Memory.** A served process keeps what its libraries cache between jobs (compiled
programs, allocator pools). Between jobs, a process over half its memory limit
(``--max-memory``; :data:`RECYCLE_SHARE`) exits, and the next job starts a fresh one, so that
the growth never makes a job fail that a fresh worker would run.

Run as ``python -m anpred.execution.served``; it reads one request per line on stdin
(``{"job": JOB_FILE, "log": LOG_FILE}``) and answers each on stdout with the job's exit
code and whether it takes another job (``"0 1"``).
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from anpred.execution.executor import JobEnd, JobSpec, LocalExecutor, RunningJob

#: The module of a participant's worker job (:mod:`anpred.execution.worker`).
WORKER_MODULE = "anpred.execution.worker"
#: The module a served process runs.
SERVE_MODULE = "anpred.execution.served"
#: Share of the memory limit above which a served process exits between two jobs.
RECYCLE_SHARE = 0.5


class Server:
    """One served process (driver side): sends it jobs, reads its answers.

    Args:
        python: The Python that runs it (``""``: this one).
        env: Its whole environment.
    """

    def __init__(self, python: str, env: Mapping[str, str]) -> None:
        self.process = subprocess.Popen(
            [python or sys.executable, "-m", SERVE_MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # each job's output goes to its own log
            env=dict(env),
        )
        self.busy = False
        self.retiring = False  # said it ends after its job: takes no more
        self.jobs = 0
        self._pending = b""

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.process.poll() is None

    def send(self, job_file: Path, log: Path) -> None:
        """Hand it one job."""
        assert self.process.stdin is not None
        request = json.dumps({"job": str(job_file), "log": str(log)}) + "\n"
        self.process.stdin.write(request.encode())
        self.process.stdin.flush()
        self.busy = True
        self.jobs += 1

    def answer(self) -> int | None:
        """The exit code of the job in flight, once it answered (never blocks)."""
        out = self.process.stdout
        assert out is not None
        while b"\n" not in self._pending:
            ready, _, _ = select.select([out], [], [], 0)
            if not ready:
                return None
            chunk = os.read(out.fileno(), 4096)
            if not chunk:  # the process ended
                return None
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        code, more = line.split()
        self.busy = False
        self.retiring = more != b"1"
        return int(code)

    def kill(self) -> None:
        """End the process now."""
        if self.alive():
            self.process.kill()
        self.process.wait()

    def close(self) -> None:
        """Let the process end (its stdin closed), killing it if it does not."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        if self.process.stdout is not None:
            self.process.stdout.close()


class ServedJob(RunningJob):
    """A worker job in a served process."""

    def __init__(self, spec: JobSpec, server: Server) -> None:
        super().__init__(spec)
        self.server = server
        self.deadline = time.monotonic() + spec.limit
        self.timed_out = False
        self.returncode: int | None = None

    def poll(self) -> bool:
        if self.returncode is not None:
            return True
        code = self.server.answer()
        if code is not None:
            self.returncode = code
        elif not self.server.alive():  # the job took its process down
            code = self.server.process.returncode
            self.returncode = 1 if code == 0 else code  # ended without finishing the job
        elif time.monotonic() > self.deadline:
            self.timed_out = True
            self.stop()
        return self.returncode is not None

    def stop(self) -> None:
        if self.returncode is None:  # in flight: only its own process can stop it
            self.server.kill()
            self.returncode = self.server.process.returncode

    def collect(self) -> JobEnd:
        return JobEnd(self.returncode, self.timed_out)


class ServedExecutor(LocalExecutor):
    """Local processes, each serving many worker jobs of one library, configuration and
    environment in turn (the faulty participants of one library share one).

    Jobs other than participants' workers (the model export) run as
    :class:`~anpred.execution.executor.LocalExecutor` runs them. Close it (or use it as a
    context manager) to end the processes.
    """

    def __init__(self) -> None:
        self.servers: dict[tuple[object, ...], list[Server]] = {}
        self.started = 0  # processes started so far (tests, benchmarks)

    def start(self, spec: JobSpec) -> RunningJob:
        if spec.module != WORKER_MODULE:
            return super().start(spec)
        job_file = spec.folder.start_job(spec.job)
        spec.folder.log_path.touch()
        server = self._server(spec)
        try:
            server.send(job_file, spec.folder.log_path)
        except OSError:  # it died between two jobs: the job goes to a fresh one
            server.kill()
            server = self._server(spec)
            server.send(job_file, spec.folder.log_path)
        return ServedJob(spec, server)

    def _server(self, spec: JobSpec) -> Server:
        env = {**os.environ, **spec.env}
        # one library per process, as in fresh workers (TensorFlow and paddle segfault in one)
        p = spec.participant
        runs = (p.library, json.dumps(dict(p.settings), sort_keys=True)) if p else ("", "")
        key = (spec.python, *runs, tuple(sorted(env.items())))
        servers = self.servers.setdefault(key, [])
        for server in list(servers):
            if not server.alive() or (server.retiring and not server.busy):
                server.close()
                servers.remove(server)
            elif not server.busy:
                return server
        server = Server(spec.python, env)
        servers.append(server)
        self.started += 1
        return server

    def close(self) -> None:
        for servers in self.servers.values():
            for server in servers:
                server.close()
        self.servers.clear()


def _over_memory() -> bool:
    """Whether this process uses more than :data:`RECYCLE_SHARE` of its memory limit."""
    from anpred.execution.memory import LIMIT_ENV, rss_bytes

    text = os.environ.get(LIMIT_ENV, "")
    used = rss_bytes(os.getpid())
    return text.isdigit() and used is not None and used > RECYCLE_SHARE * int(text)


def _redirect(log: str) -> None:
    """Point this process's stdout and stderr (file descriptors 1 and 2) at ``log``."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def serve(requests: IO[str], answers: IO[str]) -> int:
    """Run the jobs ``requests`` names, one per line, answering each with its exit code."""
    from anpred.execution.memory import die_with_parent, start_watchdog
    from anpred.execution.profiling import run_profiled
    from anpred.execution.worker import Worker

    die_with_parent()
    current: list[Worker] = []

    def out_of_memory(used: int, limit: int) -> None:
        if current:
            current[0].out_of_memory(used, limit)  # records it and dies
        os.kill(os.getpid(), signal.SIGKILL)

    start_watchdog(out_of_memory)
    kept: dict[str, Any] = {}  # the last job's runner, for a next job of the same model
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        _redirect(request["log"])
        worker = Worker(Path(request["job"]), cpu_start=time.process_time(), kept=kept)
        current[:] = [worker]
        code = run_profiled(worker.job.name, worker.run)
        current.clear()
        del worker
        gc.collect()
        sys.stdout.flush()
        sys.stderr.flush()
        recycle = _over_memory()  # then the next job gets a fresh process
        answers.write(f"{code} {0 if recycle else 1}\n")
        answers.flush()
        if recycle:
            return 0
    return 0


def main() -> int:
    """Entry point: ``python -m anpred.execution.served``."""
    answers = os.fdopen(os.dup(1), "w")  # stdout itself follows each job's log
    return serve(sys.stdin, answers)


if __name__ == "__main__":
    raise SystemExit(main())
