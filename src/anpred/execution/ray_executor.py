"""The Ray executor: each worker job is a Ray task, on whichever node of a cluster.

The task runs the same worker as a local run (``python -m MODULE JOB`` in a child process of
the Ray worker, see :func:`run_on_node`) in a temporary folder of its node, and hands the
files the worker wrote back to the driver through Ray's object store; no file system is
shared. What travels:

* to the node: the job's folder as the driver has it (e.g. a fault's rewritten graphs,
  captures of an interrupted earlier attempt) and its assets (inputs, the export's folder,
  a checkpoint, the fp64 reference's captures for stage isolation), each put into the
  object store once per executor and written to the node's folder; their paths in the job
  are rewritten to the node's copies;
* back to the driver: every file the worker created or changed (captures, status record)
  and its log, written into the job's folder of the driver's run store.

A task declares ``num_cpus = threads``; Ray runs it where CPUs are free and retries it
(``max_retries``) when its node or Ray worker is lost. Timeouts are enforced on the node, from
the moment the worker starts; crash, error and non-finite states come from the same
status record and exit code as locally (:func:`~anpred.execution.executor.job_outcome`).
Progress is per finished job: the driver's folder fills when the task ends.

Ray is imported only by :class:`RayExecutor`, never by importing this module.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from anpred.errors import UsageError
from anpred.execution.executor import Executor, JobEnd, JobSpec, RunningJob
from anpred.store import ParticipantStore
from anpred.store.participant import JOB_FILE, LOG_FILE, STATUS_FILE

#: Tasks lost with their node (or Ray worker) are run again up to this many times.
DEFAULT_MAX_RETRIES = 3
#: Files of a job's folder that stay on their side: the job file (its paths are the
#: driver's or the node's) and the log (sent back separately, appended).
_LOCAL_FILES = (JOB_FILE, LOG_FILE)

#: Ray's switch for reporting usage statistics to its vendor.
USAGE_STATS_ENV = "RAY_USAGE_STATS_ENABLED"
#: Prefix of a task's temporary folder on its node (then the Ray worker's pid).
_PREFIX = "anpred-job-"

Files = dict[str, bytes]


def pack(path: Path, skip: tuple[str, ...] = ()) -> Files:
    """The files under ``path`` (a file or a folder, links followed) by relative path."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {
        str(f.relative_to(path)): f.read_bytes()
        for f in sorted(path.rglob("*"))
        if f.is_file() and str(f.relative_to(path)) not in skip
    }


def unpack(files: Mapping[str, bytes], folder: Path) -> None:
    """Write ``files`` (:func:`pack`) under ``folder``; each file is replaced atomically.

    Capture records (``.json``) are written after the arrays they describe and the status
    record last, so a reader (or a resumed run) never sees a record without its data.
    """

    def order(name: str) -> tuple[int, str]:
        return (2 if name == STATUS_FILE else 1 if name.endswith(".json") else 0, name)

    for name in sorted(files, key=order):
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.part{os.getpid()}")
        tmp.write_bytes(files[name])
        os.replace(tmp, target)


def rewrite_paths(value: Any, moves: Mapping[str, str]) -> Any:
    """``value`` (a job) with every path string under a key of ``moves`` moved to its value."""
    if isinstance(value, dict):
        return {k: rewrite_paths(v, moves) for k, v in value.items()}
    if isinstance(value, list):
        return [rewrite_paths(v, moves) for v in value]
    if isinstance(value, str):
        for old in sorted(moves, key=len, reverse=True):
            if value == old or value.startswith(old + os.sep):
                return moves[old] + value[len(old) :]
    return value


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(f.relative_to(folder)): (f.stat().st_size, f.stat().st_mtime_ns)
        for f in folder.rglob("*")
        if f.is_file()
    }


def _remove_orphans(tmp: Path) -> None:
    """Remove the folders of tasks whose Ray worker died (a lost node, a cancelled task)."""
    for folder in tmp.glob(f"{_PREFIX}*-*"):
        pid = folder.name[len(_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


def run_on_node(task: Mapping[str, Any], folder_files: Files, *assets: Files) -> dict[str, Any]:
    """The body of a job's Ray task: run the worker on this node, return what it wrote.

    Args:
        task: ``module``, ``job`` (driver paths), ``folder`` (the driver's job folder),
            ``assets`` (``[driver path, is a file]``, in the order of ``assets``), ``env``
            (variables on top of this process's environment) and ``limit`` (seconds).
        folder_files: The job folder's files as the driver has them.
        assets: Each asset's files (:func:`pack`).

    Returns:
        ``returncode``, ``timed_out``, ``files`` (created or changed, by relative path),
        ``log`` (the worker's output), ``where`` (host name) and ``seconds``.
    """
    _remove_orphans(Path(tempfile.gettempdir()))
    root = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
    try:
        moves: dict[str, str] = {}
        for index, ((driver_path, is_file), files) in enumerate(
            zip(task["assets"], assets, strict=True)
        ):
            target = root / "assets" / str(index)
            unpack(files, target)
            moves[driver_path] = str(target / Path(driver_path).name if is_file else target)
        folder = ParticipantStore(root / "job").create()
        unpack(folder_files, folder.folder)
        moves[task["folder"]] = str(folder.folder)
        job_file = folder.write_job(rewrite_paths(dict(task["job"]), moves))
        before = _snapshot(folder.folder)
        started = time.monotonic()
        timed_out = False
        with folder.open_log() as log:
            process = subprocess.Popen(
                [task.get("python") or sys.executable, "-m", task["module"], str(job_file)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **task["env"]},
            )
            try:
                process.wait(timeout=task["limit"])
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        files = {
            name: (folder.folder / name).read_bytes()
            for name, stamp in _snapshot(folder.folder).items()
            if name not in _LOCAL_FILES and before.get(name) != stamp
        }
        return {
            "returncode": process.returncode,
            "timed_out": timed_out,
            "files": files,
            "log": folder.log_path.read_bytes(),
            "where": socket.gethostname(),
            "seconds": round(time.monotonic() - started, 3),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


class RayJob(RunningJob):
    """A job submitted as a Ray task; its folder on the driver fills when it ends."""

    def __init__(self, spec: JobSpec, ref: Any) -> None:
        super().__init__(spec)
        self.ref = ref
        self.seconds: float | None = None

    def poll(self) -> bool:
        import ray

        ready, _ = ray.wait([self.ref], timeout=0)
        return bool(ready)

    def stop(self) -> None:
        import ray

        if not self.poll():
            ray.cancel(self.ref, force=True)

    def collect(self) -> JobEnd:
        import ray

        try:
            result = ray.get(self.ref)
        except ray.exceptions.RayError as err:
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
            return JobEnd(None, lost=f"the Ray task was lost: {type(err).__name__}: {reason}")
        unpack(result["files"], self.folder.create().folder)
        with self.folder.open_log() as log:
            log.write(f"[anpred] Ray task on {result['where']}\n".encode() + result["log"])
        self.seconds = result["seconds"]
        return JobEnd(result["returncode"], result["timed_out"], where=result["where"])


class RayExecutor(Executor):
    """Jobs as Ray tasks on a cluster (or on an embedded instance: ``address="local"``).

    Args:
        address: ``"local"`` (start an embedded instance, shut down on close), or the
            address of a running cluster (``auto``, ``HOST:PORT``, ``ray://HOST:10001``).
        num_cpus: CPUs of the embedded instance.
        max_retries: Times a task lost with its node is run again.

    Raises:
        UsageError: Ray is not installed, or the cluster cannot be reached.
    """

    def __init__(
        self, address: str, num_cpus: int | None = None, max_retries: int = DEFAULT_MAX_RETRIES
    ) -> None:
        # Ray reports usage statistics to its vendor unless told not to; anpred never phones
        # home (an embedded instance and its processes inherit this; a cluster started by
        # `ray start` follows its own setting: docs/distributed.md)
        os.environ[USAGE_STATS_ENV] = "0"
        try:
            import ray
        except ImportError:
            raise UsageError("--ray needs Ray: pip install 'anpred[ray]'") from None
        self.address = address
        self.max_retries = max_retries
        self._owns = not ray.is_initialized()
        if self._owns:
            kwargs: dict[str, Any] = {"logging_level": logging.ERROR}
            if address == "local":
                kwargs.update(num_cpus=num_cpus, include_dashboard=False)
            else:
                kwargs["address"] = address
            main_thread = threading.current_thread() is threading.main_thread()
            sigterm = signal.getsignal(signal.SIGTERM) if main_thread else None
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as err:
                first = (str(err).strip().splitlines() or [""])[0][:300]
                raise UsageError(f"cannot reach the Ray cluster at {address!r}: {first}") from None
            finally:
                if main_thread and sigterm is not None:
                    # Ray installs its own; anpred's (SIGTERM ends it like Ctrl-C) must stay
                    signal.signal(signal.SIGTERM, sigterm)
        self._assets: dict[tuple[str, tuple[tuple[str, int, int], ...]], Any] = {}
        self._remote = ray.remote(run_on_node)

    def slots(self, parallel: int) -> int:
        """Every job at once: the cluster queues them by the CPUs they declare."""
        return 1 << 30

    def node_cpus(self) -> float:
        """CPUs of the largest live node."""
        import ray

        return max(
            (n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")), default=0.0
        )

    def _asset(self, path: Path) -> Any:
        """The object-store reference of ``path``'s files (put once while they are unchanged)."""
        import ray

        files = [path] if path.is_file() else sorted(f for f in path.rglob("*") if f.is_file())
        stamp = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
        key = (str(path), stamp)
        if key not in self._assets:
            self._assets[key] = ray.put(pack(path))
        return self._assets[key]

    def start(self, spec: JobSpec) -> RayJob:
        cpus = self.node_cpus()
        if spec.threads > cpus:
            raise UsageError(
                f"a worker needs {spec.threads} CPUs (--threads) but the largest node of the "
                f"Ray cluster has {cpus:g}"
            )
        spec.folder.create().write_job(spec.job)  # the driver's record, with its paths
        task = {
            "module": spec.module,
            "python": spec.python,
            "job": dict(spec.job),
            "folder": str(spec.folder.folder),
            "assets": [[str(a), a.is_file()] for a in spec.assets],
            "env": dict(spec.env),
            "limit": spec.limit,
        }
        name = spec.participant.name if spec.participant else spec.folder.folder.name
        remote = self._remote.options(
            num_cpus=spec.threads,
            max_retries=self.max_retries,
            retry_exceptions=False,
            name=f"anpred worker {name}",
        )
        ref = remote.remote(
            task,
            pack(spec.folder.folder, skip=_LOCAL_FILES),
            *(self._asset(a) for a in spec.assets),
        )
        return RayJob(spec, ref)

    def close(self) -> None:
        import ray

        self._assets.clear()
        if self._owns and ray.is_initialized():
            ray.shutdown()
