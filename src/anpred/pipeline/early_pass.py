"""Analysing inputs while the last workers still run.

Once no worker is left to start, a run's slots free up one by one while the last workers
finish their inputs. An input whose captures every participant has written for good (its
capture, and its isolated capture where the run isolates, or the worker ended without
them) is already what the analysis will read, so it can be collected in a free slot then
(:mod:`anpred.pipeline.collect_pool`'s processes, from the run's fork server) instead of
after the last worker. The pass after the workers takes over the processes and the inputs
submitted to them (:meth:`EarlyPass.hand_over`) when it collects as they were collected:
same participants, references, anchors, oracle parameters and loops; otherwise it stops
them and collects every input itself. Either way the records are those one pass over the
finished run gathers (tests/pipeline/test_early_pass.py).

Whether the pass uses the compiled loops is decided as the pass decides it, from the
first input's captures, so nothing is submitted before the first input is complete.
Getting ahead must never disturb the run: any error stops the early pass, and the pass
after the workers collects what it did not deliver. Nothing starts while the fp64
reference's worker runs: a slot holds a worker or an analysis process, which keeps the
run within the memory its budget counted (:mod:`anpred.execution.resources`: the larger of
the workers' and the analysis's peaks), but the reference's worker is larger than a slot's
share.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from anpred.analysis import onepass
from anpred.analysis.oracle import OracleParams
from anpred.pipeline import collect_pool
from anpred.pipeline.collect_pool import PassTask, Started
from anpred.pipeline.evidence import Collection, RunEvidence
from anpred.store import ISOLATED, RunStore, Status


class EarlyPass:
    """The inputs of a run collected in the slots its last workers leave free.

    Args:
        collection: What the analysis will collect (its participants, anchors, parameters).
        input_ids: The run's inputs, in order.
        processes: Processes at most (the run's ``--parallel``).
        isolation: Whether the participants also write isolated captures.
    """

    def __init__(
        self,
        collection: Collection,
        input_ids: Sequence[str],
        processes: int,
        isolation: bool,
    ) -> None:
        self.collection = collection
        self.store = RunStore(collection.run_dir)
        self.names = collection.names
        self.input_ids = list(input_ids)
        self.processes = processes
        self.isolation = isolation
        self.task: PassTask | None = None  # decided with the first input
        self.pool: ProcessPoolExecutor | None = None
        self.futures: dict[str, Future[RunEvidence | None]] = {}
        self.closed = processes < 2 or len(self.input_ids) < 2
        self._complete: set[tuple[str, str]] = set()  # (participant, input) written for good
        self._statuses: dict[str, dict[str, object]] = {}  # this tick's status records

    def tick(self, free: int) -> None:
        """Submit inputs every participant has finished while fewer than ``free`` are being
        collected (``free``: the run's idle slots now). Never raises.
        """
        try:
            self._statuses = {}  # read once per tick
            if self.closed or free < 1 or not _ended(self._status(self.names[0])):
                return  # beside the fp64 reference's worker, the run's memory budget has no room
            busy = sum(not f.done() for f in self.futures.values())
            for input_id in self.input_ids:
                if busy >= free:
                    return
                if input_id in self.futures or not self._ready(input_id):
                    continue
                if self.task is None and not self._decide():
                    return
                assert self.task is not None
                if self.pool is None:
                    self.pool = collect_pool.new_pool(self.processes, self.task.compiled)
                self.futures[input_id] = self.task.submit(self.pool, input_id)
                busy += 1
        except Exception:  # noqa: BLE001 - see the module's docstring
            self.close()

    def _decide(self) -> bool:
        """Decide the loops as the pass will (the first input must be complete); ``False``
        (and closed) when the pass would not use processes or would compile the loops first.
        """
        if not self._ready(self.input_ids[0]):
            return False
        work, compiled = collect_pool.plan_pass(self.store.root, self.names, self.input_ids)
        if work < collect_pool.MIN_BYTES or (compiled and not _loops_cached()):
            self.close()
            return False
        self.task = PassTask(self.collection, compiled)
        return True

    def _ready(self, input_id: str) -> bool:
        """Whether every participant has written ``input_id``'s captures for good."""
        return all(self._done_with(name, input_id) for name in self.names)

    def _done_with(self, name: str, input_id: str) -> bool:
        if (name, input_id) in self._complete:
            return True
        folder = self.store.participant(name)
        done = folder.capture_done(input_id)
        if done and (
            not self.isolation or name == self.names[0] or folder.capture_done(input_id, ISOLATED)
        ):
            self._complete.add((name, input_id))
            return True
        # without its captures (or isolated capture) so far: for good only once it ended,
        # or, for the isolated capture, once its runtime said it cannot isolate
        status = self._status(name)
        if _ended(status) or (done and "isolation" in status):
            self._complete.add((name, input_id))
            return True
        return False

    def _status(self, name: str) -> dict[str, object]:
        if name not in self._statuses:
            self._statuses[name] = self.store.participant(name).read_status()
        return self._statuses[name]

    def hand_over(self, task: PassTask) -> Started | None:
        """The pool and the inputs submitted to it, for a pass that collects ``task``;
        ``None`` (nothing submitted, or submitted for another task). The early pass is
        finished either way.
        """
        if self.closed or self.pool is None or task != self.task:
            self.close()
            return None
        started = (self.pool, dict(self.futures))
        self.pool, self.futures, self.closed = None, {}, True
        return started

    def close(self) -> None:
        """Stop: cancel what has not started, stop the processes. Idempotent."""
        self.closed = True
        pool, self.pool, self.futures = self.pool, None, {}
        if pool is None:
            return
        # the executor has no public way to stop its processes before Python 3.14
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


def for_run(
    run_dir: Path,
    participants: Sequence[str],
    input_ids: Sequence[str],
    processes: int,
    isolation: bool,
) -> EarlyPass:
    """The early pass of a run whose export (and calibration, if any) are written, set to
    collect as :func:`~anpred.pipeline.analyse.analyse` will: its anchors, the oracle's
    parameters with the run's calibration, the fp64 and fp32 references.

    Args:
        run_dir: The run directory.
        participants: The judged participants, in the order the run records them.
        input_ids: The inputs the workers run, in order.
        processes: Processes at most (the run's ``--parallel``).
        isolation: Whether the participants also write isolated captures.
    """
    from anpred.calibration.stored import with_stored_calibration

    store = RunStore(run_dir)
    anchors = [a["key"] for a in store.read_export()["anchors"]]
    params = with_stored_calibration(store, OracleParams())
    return EarlyPass(
        Collection.of(run_dir, participants, anchors, params), input_ids, processes, isolation
    )


def _ended(status: dict[str, object]) -> bool:
    """Whether a worker's status says it ended (no state yet: it runs)."""
    return Status.parse(status.get("state"), Status.RUNNING) != Status.RUNNING


def _loops_cached() -> bool:
    loops = onepass.kernels()
    return loops is not None and loops.cached()
