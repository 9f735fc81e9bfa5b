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

The analysis of a run directory can run as a Ray task too (:meth:`RayExecutor.analyse`,
used by ``anpred eval --ray`` for each fault and configuration run): the files the analysis
reads travel to a node (:func:`~anpred.execution.ray_analysis.analysis_pieces`; the clean
participants' captures, linked into every fault run, are put into the object store once),
:func:`~anpred.execution.ray_analysis.analyse_on_node` analyses a copy there, and the summary
and the files it wrote (the deviations table) come back into the driver's run directory.

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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from anpred.errors import UsageError
from anpred.execution.executor import Executor, JobEnd, JobSpec, RunningJob
from anpred.store import ParticipantStore
from anpred.store.participant import JOB_FILE, LOG_FILE, STATUS_FILE
from anpred.store.summary import Summary

#: Tasks lost with their node (or Ray worker) are run again up to this many times.
DEFAULT_MAX_RETRIES = 3
#: Files of a job's folder that stay on their side: the job file (its paths are the
#: driver's or the node's) and the log (sent back separately, appended).
_LOCAL_FILES = (JOB_FILE, LOG_FILE)

#: Bytes of files the executor keeps in the object store for reuse (assets, the clean
#: participants of an evaluation's fault runs); older ones are dropped past it.
ASSET_CACHE_BYTES = 2 << 30
#: Ray's switch for reporting usage statistics to its vendor.
USAGE_STATS_ENV = "RAY_USAGE_STATS_ENABLED"
#: Prefix of a task's temporary folder on its node (then the Ray worker's pid).
TASK_PREFIX = "anpred-job-"

Files = dict[str, bytes]


def _members(path: Path, skip: tuple[str, ...] = (), flat: bool = False) -> list[Path]:
    """The files :func:`pack` takes from ``path``, sorted."""
    if path.is_file():
        return [path]
    found = path.iterdir() if flat else path.rglob("*")
    return sorted(f for f in found if f.is_file() and str(f.relative_to(path)) not in skip)


def pack(path: Path, skip: tuple[str, ...] = (), flat: bool = False) -> Files:
    """The files under ``path`` (a file or a folder, links followed) by relative path.

    Args:
        path: A file (packed under its name) or a folder.
        skip: Relative paths left out.
        flat: Only the folder's own files, not those of its subfolders.
    """
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {str(f.relative_to(path)): f.read_bytes() for f in _members(path, skip, flat)}


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


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Size and modification time of every file under ``folder``, by relative path."""
    return {
        str(f.relative_to(folder)): (f.stat().st_size, f.stat().st_mtime_ns)
        for f in folder.rglob("*")
        if f.is_file()
    }


def remove_orphans(tmp: Path) -> None:
    """Remove the folders of tasks whose Ray worker died (a lost node, a cancelled task)."""
    for folder in tmp.glob(f"{TASK_PREFIX}*-*"):
        pid = folder.name[len(TASK_PREFIX) :].split("-", 1)[0]
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
    remove_orphans(Path(tempfile.gettempdir()))
    root = Path(tempfile.mkdtemp(prefix=f"{TASK_PREFIX}{os.getpid()}-"))
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
        before = snapshot(folder.folder)
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
            for name, stamp in snapshot(folder.folder).items()
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
                # "local" always starts an instance of its own; without an address, Ray
                # would join whatever RAY_ADDRESS or /tmp/ray/ray_current_cluster names
                # (a `ray start` cluster, a test's ray.cluster_utils.Cluster, a stale file)
                kwargs.update(address="local", num_cpus=num_cpus, include_dashboard=False)
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
        self._assets: dict[tuple[Any, ...], Any] = {}
        self._sizes: dict[tuple[Any, ...], int] = {}
        self._lock = threading.Lock()
        self._remote = ray.remote(run_on_node)
        from anpred.execution.ray_analysis import analyse_on_node

        self._analyse = ray.remote(analyse_on_node)
        #: ``(run directory, node, seconds)`` of each analysis run as a Ray task.
        self.analysed: list[tuple[str, str, float]] = []

    def slots(self, parallel: int) -> int:
        """Every job at once: the cluster queues them by the CPUs they declare."""
        return 1 << 30

    def node_cpus(self) -> float:
        """CPUs of the largest live node."""
        import ray

        return max(
            (n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")), default=0.0
        )

    def _asset(self, path: Path, flat: bool = False, skip: tuple[str, ...] = ()) -> Any:
        """The object-store reference of ``path``'s files (:func:`pack`), put once while
        they are unchanged; ``path`` is resolved, so every link to one folder shares it.

        The references held are capped at :data:`ASSET_CACHE_BYTES` (the oldest dropped
        first; Ray frees an object once no task still needs it).
        """
        import ray

        path = path.resolve()
        files = _members(path, skip, flat)
        stamp = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
        key = (str(path), flat, skip, stamp)
        with self._lock:  # fault runs of an evaluation start their jobs from threads
            if key not in self._assets:
                self._assets[key] = ray.put(pack(path, skip, flat))
                self._sizes[key] = sum(size for _, size, _ in stamp)
                while len(self._assets) > 1 and sum(self._sizes.values()) > ASSET_CACHE_BYTES:
                    oldest = next(iter(self._assets))
                    del self._assets[oldest], self._sizes[oldest]
            return self._assets[key]

    def analyse(self, run_dir: Path, analyse: Callable[[Path], Summary]) -> Summary:
        """Analyse ``run_dir`` in a Ray task (:mod:`.ray_analysis`) with ``analyse`` (the
        pipeline's :func:`anpred.pipeline.analyse.analyse`, passed by the caller: execution
        knows no analysis); write what the analysis wrote into it and return the summary
        (the caller writes it), as ``analyse(run_dir)`` does locally.

        A task the cluster loses (more than ``max_retries`` times) or one that fails (a
        damaged run directory) is analysed again here, so that the result, or the error
        and its message, is the local one.
        """
        import ray

        from anpred.execution.ray_analysis import analysis_pieces, is_flat

        run_dir = Path(run_dir)
        pieces = analysis_pieces(run_dir)
        refs = [
            self._asset(path, is_flat(rel, path), _LOCAL_FILES)
            if shared
            else ray.put(pack(path, _LOCAL_FILES, is_flat(rel, path)))
            for rel, path, shared in pieces
        ]
        remote = self._analyse.options(
            num_cpus=1,
            max_retries=self.max_retries,
            retry_exceptions=False,
            name=f"anpred analysis {run_dir.name}",
        )
        layout = [[rel, path.is_file()] for rel, path, _ in pieces]
        try:
            result = ray.get(remote.remote(layout, analyse, *refs))
        except ray.exceptions.RayError:
            return analyse(run_dir)
        unpack(result["files"], run_dir)
        self.analysed.append((str(run_dir), result["where"], result["seconds"]))
        return Summary.from_dict(result["summary"])

    def start(self, spec: JobSpec) -> RayJob:
        cpus = self.node_cpus()
        if spec.threads > cpus:
            raise UsageError(
                f"a worker needs {spec.threads} CPUs (--threads) but the largest node of the "
                f"Ray cluster has {cpus:g}"
            )
        spec.folder.start_job(spec.job)  # the driver's record, with its paths
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
        self._sizes.clear()
        if self._owns and ray.is_initialized():
            ray.shutdown()
