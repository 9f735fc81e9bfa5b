"""The worker process: one participant, every input, streamed to the run directory.

Run as ``python -m anpred.execution.worker JOB.json``. Writes into its participant folder
of the run store (:class:`~anpred.store.ParticipantStore`), per input, a capture (anchors +
the plain final output, and a record of layouts, the observer effect and non-finite
anchors), optionally the stage-isolation capture, and keeps its status record up to date
so that the parent can name the step a crash or hang happened in.

The transforms the job plans for the participant (a fault, see
:mod:`anpred.interchange.transform`) are applied around the runner: another model, per-node
hooks, or a wrapper around its inference; their records go into its status record.

**Observer effect on a sample.** The plain model (anchors not exposed) runs on the first
:data:`OBSERVER_INPUTS` inputs of the job only (of the run, when the job names them under
:data:`~anpred.execution.job.OBSERVER_KEY`: a chunk of a run); their captures hold its output and an
observer record, the others none (the rule is recorded in the status, ``observer_rule``);
the fp64 reference, which is not judged, runs none.

**The fp64 reference may still run.** When the job says so
(:attr:`~anpred.execution.job.WorkerJob.reference_running`, set by
:func:`anpred.execution.pool.run_workers` for a local pool), the fp64 reference's
captures appear while this worker runs: an input whose reference capture is not there yet
is isolated after every capture is written, waiting for the reference's capture until the
reference's status says it ended.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from anpred.backends.base import IsolationUnavailable, ModelJob, ParticipantFailure, Runner
from anpred.backends.registry import runner_class
from anpred.errors import AnpredError, DamagedRunError
from anpred.execution.job import WorkerJob
from anpred.execution.memory import die_with_parent, start_watchdog
from anpred.execution.offline import OfflineGuard, install_guard
from anpred.execution.profiling import run_profiled
from anpred.execution.resources import format_size
from anpred.execution.resumed import Resumption
from anpred.interchange.transform import TRANSFORMS_KEY, Transforms, transform_from_record
from anpred.library import Loads, get_library
from anpred.participants import REFERENCE64
from anpred.store import CAPTURE, ISOLATED, PLAIN_KEY, ParticipantStore, Status, Step

OBSERVER_INPUTS = 2
"""Inputs (the job's first ones) on which the plain model also runs: the observer check.

Whether exposing anchors changes what a library computes is a property of the compiled
program (fusion, kernel choice), not of an input: two inputs show it (the second guards
against a value-dependent kernel path) at a fraction of one more inference per input,
which was a third of a worker's inference time (yolov8n, benchmarks/bench_run.py)."""

REFERENCE_POLL = 0.05
"""Seconds between two looks at the fp64 reference's folder while waiting for it."""


class _Feeds:
    """The run's inputs, read from its ``inputs.npz`` when an input is needed, the last one
    kept (an input is used by its anchored, plain and isolated inference in a row).

    Loading every input up front held them all in every worker: 4.9 MB per 640x640 input,
    so the workers' memory grew with the run's inputs (and a chunk's worker held every
    chunk's), most of anpred's memory slope in ``benchmarks/bench_scaling.py``.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._key: str | None = None
        self._value = np.empty(0)

    def __getitem__(self, input_id: str) -> np.ndarray:
        if input_id != self._key:
            with np.load(self.path) as data:
                self._value = data[input_id]
            self._key = input_id
        return self._value


def _observer(anchored: np.ndarray, plain: np.ndarray) -> dict[str, Any]:
    same_shape = anchored.shape == plain.shape
    diff = float(np.max(np.abs(anchored.astype(np.float64) - plain))) if same_shape else None
    return {
        "identical": bool(same_shape and np.array_equal(anchored, plain)),
        "max_abs_diff": diff,
        "shape_match": same_shape,
    }


def _nonfinite(arrays: dict[str, np.ndarray]) -> list[str]:
    return [
        k
        for k, v in arrays.items()
        if np.issubdtype(v.dtype, np.floating) and not np.all(np.isfinite(v))
    ]


class Worker:
    """Executes one job file.

    Args:
        job_path: The job file.
        cpu_start: This process's CPU seconds when the job began (its ``cpu`` timing
            counts from there: 0 for a process started for it, the served process's
            CPU so far for a served one, :mod:`anpred.execution.served`).
        kept: A served process's runner of its previous job, by :meth:`_runner_key`: a job
            of the same participant, model and transforms (the next chunk of a run) runs on
            it instead of loading, translating and compiling the model again; this job's
            runner is left in it when the job succeeds.
    """

    def __init__(
        self, job_path: Path, cpu_start: float = 0.0, kept: dict[str, Runner] | None = None
    ) -> None:
        self.cpu_start = cpu_start
        #: Runners kept by a served process between its jobs, by :meth:`_runner_key`.
        self.kept: dict[str, Runner] = kept if kept is not None else {}
        self.job = WorkerJob.from_dict(ParticipantStore.load_job(job_path))
        self.store = ParticipantStore(self.job.out).create()
        self.out = self.store.folder
        self.status: dict[str, Any] = {
            "state": Status.RUNNING,
            "step": Step.LOAD,
            "pid": os.getpid(),
            "participant": self.job.name,
        }
        self.guard: OfflineGuard | None = None
        self.runner: Runner | None = None
        #: What this job takes from a clean participant's captures (a fault run's job).
        self.resumption: Resumption | None = None
        self.waited = 0.0  # seconds spent waiting for the fp64 reference's captures
        #: CPU seconds this job spent writing capture files and in the observer check's
        #: plain inferences (status ``timings``: where a worker's CPU goes beyond the
        #: inferences the method needs, benchmarks/bench_run.py).
        self.spent = {"capture_cpu": 0.0, "observer_cpu": 0.0}

    def update(self, **fields: Any) -> None:
        """Merge ``fields`` into ``status.json``."""
        self.status.update(fields)
        self.store.write_status(self.status)

    def out_of_memory(self, used: int, limit: int) -> None:
        """Record that this worker went over its memory limit, and die (watchdog thread)."""
        try:
            self.update(
                killed_for=f"out of memory: used {format_size(used)}, over the worker limit "
                f"of {format_size(limit)} (--max-memory)"
            )
        finally:
            os.kill(os.getpid(), signal.SIGKILL)

    def run(self) -> int:
        """Run the job; return the process exit code."""
        start = time.perf_counter()
        self.update()
        try:
            return self._run(start)
        except Exception as err:  # a library error is a symptom, recorded, not a crash
            own = isinstance(err, ParticipantFailure)  # its message is the error as is
            try:
                self._converted_records()
            except Exception:  # the original error is what gets recorded
                pass
            self.update(
                state=Status.ERROR,
                message=(str(err) if own else f"{err.__class__.__name__}: {err}")[:2000],
                error_type=err.__class__.__name__,
                usage_error=isinstance(err, AnpredError),
                traceback=traceback.format_exc()[-4000:],
                **({"step": err.step} if own else {}),
            )
            return 1

    def _converted_records(self) -> None:
        """A deployment runtime's conversion record and its offline guard's refusals."""
        record = self.runner.conversion_record() if self.runner is not None else None
        if record is not None:
            self.store.write_conversion(record)
        if self.guard is not None:
            self.status["offline"] = self.guard.record()

    def _run(self, start: float) -> int:
        library = self.job.library
        if get_library(library).loads == Loads.CONVERTED_ARTIFACT:
            self.guard = install_guard()  # before the runtime or its converter is imported
        records = self.job.transforms.get(self.job.name, [])
        transforms = Transforms(tuple(transform_from_record(r) for r in records))
        job = transforms.model(ModelJob.from_dict(self.job.model))
        key = self._runner_key(records)
        runner = self.kept.pop(key, None) if key is not None else None
        reused = runner is not None
        if runner is None:
            runner = runner_class(library).for_job(job)(
                self.job.settings, transforms.node_hooks(library)
            )
            runner.resuming = self.job.resume is not None
        self.kept.clear()  # one runner kept at most: the last job's
        self.runner = runner
        if self.job.resume is not None:
            keys = [a.key for a in job.export.anchors]
            self.resumption = Resumption(self.job.resume, keys)
        runner.on_step = lambda step: self.update(step=step)  # a converter crash is named
        self.update(step=Step.LOAD, timings={"import": round(time.perf_counter() - start, 4)})
        if reused:
            self.status["runner"] = "kept from the process's previous job (same model)"
        else:
            runner.activate(job)
        self._converted_records()
        infer = transforms.wrap_infer(runner.infer)
        self.update(
            step=runner.step.value,
            version=runner.version(),
            settings=runner.describe_settings(),
            timings={"import": self.status["timings"]["import"], **runner.timings},
            **{TRANSFORMS_KEY: transforms.records()},
        )
        feeds = _Feeds(self.job.inputs)
        nonfinite_any = False
        later: list[str] = []  # inputs whose fp64 reference capture was not there yet
        self.status["observer_rule"] = f"plain model on the first {OBSERVER_INPUTS} inputs"
        observed = self.job.observer_inputs
        if observed is None:
            observed = self.job.input_ids[:OBSERVER_INPUTS]
        if self.job.name == REFERENCE64:  # not judged: nothing reads its observer record
            self.status["observer_rule"] = "none (the fp64 reference is not judged)"
            observed = ()
        if self.resumption is not None:  # its plain model is the clean one's, checked there
            self.status["observer_rule"] = (
                "none on resumed inputs (the clean participant's run checked its graph)"
            )
        for input_id in self.job.input_ids:
            if not self.store.capture_done(input_id):
                self.update(step=Step.EXECUTE, input=input_id)
                if runner.wants_reference:  # a converted runtime's output mapping may need it
                    runner.reference = self._reference(input_id)
                resumed = None
                if self.resumption is not None:
                    resumed = self.resumption.anchored(runner, feeds[input_id], input_id)
                if resumed is not None:
                    arrays, meta = resumed[0], {"layouts": resumed[1], "resumed": True}
                else:
                    capture = infer(feeds[input_id])
                    arrays, meta = dict(capture.arrays), {"layouts": capture.layouts}
                    if input_id in observed:
                        began = time.process_time()
                        plain = runner.infer_plain(feeds[input_id])
                        self.spent["observer_cpu"] += time.process_time() - began
                        arrays[PLAIN_KEY] = plain
                        meta["observer"] = _observer(capture.arrays["output"], plain)
                self.update(step=Step.CAPTURE)
                bad = _nonfinite({k: v for k, v in arrays.items() if k != PLAIN_KEY})
                nonfinite_any |= bool(bad)
                self._write(
                    input_id, arrays, {**meta, "nonfinite": bad, "timings": dict(runner.timings)}
                )
                self._converted_records()
            elif self.store.read_capture_meta(input_id)["nonfinite"]:
                nonfinite_any = True
            if not self._isolate(runner, feeds[input_id], input_id, wait=False):
                later.append(input_id)
        for input_id in later:
            self._isolate(runner, feeds[input_id], input_id, wait=True)
        self._converted_records()
        key = self._runner_key(records)
        if key is not None:
            self.kept[key] = runner
        if self.resumption is not None:
            self.status["resume"] = self.resumption.record()
        self.update(
            state=Status.NON_FINITE if nonfinite_any else Status.OK,
            step=Step.DONE,
            timings={
                **self.status["timings"],
                **runner.timings,
                "cpu": round(time.process_time() - self.cpu_start, 2),
                "reference_wait": round(self.waited, 2),
                **{k: round(v, 4) for k, v in self.spent.items()},
            },
            settings=runner.describe_settings(),
        )
        return 0

    def _runner_key(self, records: list[Any]) -> str | None:
        """What makes a runner reusable by another job: the library, its settings, the
        model and the transforms (``None``: never reused, a deployment runtime's, whose
        conversion records belong to one job's folder).
        """
        if get_library(self.job.library).loads == Loads.CONVERTED_ARTIFACT:
            return None
        what = [self.job.library, self.job.settings, self.job.model, records]
        return json.dumps(what, sort_keys=True, default=str)

    def _reference_capture(self, input_id: str, wait: bool) -> dict[str, np.ndarray] | None:
        """The fp64 reference's anchors for ``input_id`` (``None``: no isolation source, or
        no capture of it: not yet, or never when ``wait`` and its worker ended without it).
        """
        source = self.job.isolation_source
        if source is None:
            return None
        reference = ParticipantStore(source)
        if wait and self.job.reference_running:
            started = time.perf_counter()
            while not reference.capture_done(input_id) and _still_running(reference):
                time.sleep(REFERENCE_POLL)
            self.waited += time.perf_counter() - started
        capture = reference.open_capture(input_id)
        if capture is None:
            return None
        with capture:  # the anchors only: the plain output is not fed to anything
            return {k: capture[k] for k in capture.keys() if k != PLAIN_KEY}

    def _reference(self, input_id: str) -> dict[str, np.ndarray] | None:
        """The fp64 reference's anchors for ``input_id``, when the job names them (waits
        for them while the reference runs).
        """
        return self._reference_capture(input_id, wait=True)

    def _isolate(self, runner: Runner, feed: np.ndarray, input_id: str, wait: bool) -> bool:
        """Isolate ``input_id``'s stages; return ``False`` when its fp64 reference capture
        is not there (yet) and the worker did not ``wait`` for it.
        """
        source = self.job.isolation_source
        if source is None or self.store.capture_done(input_id, ISOLATED):
            return True
        if "isolation" in self.status:  # the runtime said it cannot isolate
            return True
        if not ParticipantStore(source).capture_done(input_id):
            if not wait:
                return False
            self.update(step=Step.EXECUTE, input=input_id, phase="waiting for the fp64 reference")
        reference = self._reference_capture(input_id, wait)
        if reference is None:
            return True  # the fp64 reference failed on this input: nothing to isolate against
        self.update(step=Step.EXECUTE, input=input_id, phase="isolation")
        if self.resumption is not None:  # rounds to float32 the anchors it feeds only
            resumed = self.resumption.isolated_capture(runner, feed, input_id, reference)
            if resumed is not None:
                meta = {"layouts": resumed[1], "resumed": True}
                self._write(input_id, resumed[0], meta, ISOLATED)
                return True
        fed = {k: v.astype(np.float32) for k, v in reference.items()}
        try:
            capture = runner.isolate(feed, fed)
        except IsolationUnavailable as err:  # the participant goes on without isolation
            self.update(isolation=f"isolation unavailable: {err}")
            return True
        self._write(input_id, capture.arrays, {"layouts": capture.layouts}, ISOLATED)
        return True

    def _write(
        self,
        input_id: str,
        arrays: dict[str, np.ndarray],
        meta: Mapping[str, Any],
        kind: str = CAPTURE,
    ) -> None:
        """Write one capture file (and its record), counting the CPU it takes."""
        began = time.process_time()
        self.store.write_capture(input_id, arrays, meta, kind)
        self.spent["capture_cpu"] += time.process_time() - began


def _still_running(reference: ParticipantStore) -> bool:
    """Whether the reference's worker may still write captures: it has not started yet, or
    its status says it runs (the pool records how a job that died without a word ended).
    """
    if not reference.has_status():
        return True
    try:
        state = Status.parse(reference.read_status().get("state"))
    except DamagedRunError:  # cannot happen with atomic writes; look again
        return True
    return state == Status.RUNNING


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m anpred.execution.worker JOB.json``."""
    args = sys.argv[1:] if argv is None else argv
    die_with_parent()
    worker = Worker(Path(args[0]))
    start_watchdog(worker.out_of_memory)
    return run_profiled(worker.job.name, worker.run)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # everything is on disk (atomic writes): skip the interpreter's teardown, which freed
    # the libraries' state for ~0.2-0.9 CPU s per worker (yolov8n, benchmarks/bench_run.py)
    os._exit(code)
