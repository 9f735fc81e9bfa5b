"""The streaming pass over several processes: one input per task, records merged.

:func:`~anpred.pipeline.evidence.collect` handles one input at a time and its records are
per input, so the inputs of a run can be collected in separate processes and their
records merged (:func:`anpred.pipeline.statistics.merge`, the merge runs in chunks use)
into exactly what one pass over all of them gathers: same numbers, same order, the same
``statistics.json.gz`` byte for byte (tests/pipeline/test_collect_pool.py). The processes
are forked from a fork server (not from the driver, which may hold threads that ``fork``
would copy mid-flight) that imported NumPy and anpred's analysis once and, for passes
that use them, loaded the compiled loops once (:data:`PRELOAD`): each process then starts
ready instead of paying ~1.2 CPU s for its imports and numba's code. Where there is no
fork server (not POSIX) they are spawned.

It is worth it only when the inputs carry enough data to outweigh starting the processes
(:data:`MIN_BYTES`); a run of the tiny test models is collected in this process. Should
a process fail (a damaged capture raises in it, or the pool cannot start), the inputs it
did not deliver are collected here, so the error is the one the serial pass raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from anpred import fork_server
from anpred.analysis import onepass
from anpred.pipeline.evidence import Collection, RunEvidence
from anpred.pipeline.statistics import merge
from anpred.progress import Say, quiet
from anpred.store import RunStore

if TYPE_CHECKING:
    from anpred.pipeline.early_pass import EarlyPass

MIN_BYTES = 64 << 20
"""Capture bytes (all participants' captures of the inputs, on disk) below which the pass
stays in one process. Starting a ``spawn`` process that imports NumPy and anpred's analysis
took ~0.6 s here, about what the pass needs for ~60 MB of captures (yolov8n: 280 MB per
input with six libraries and the fp64 reference, 2.1 s per input); a fork server costs
about as much once."""

COMPILED_MIN_BYTES = 200 << 20
"""Captures (bytes on disk) from which a pass uses the compiled loops of
:mod:`anpred.analysis.compiled`. Loading them costs ~0.9 s (numba's import 0.4 s, the cached
code 0.5 s), once in the fork server the pass's processes fork from (in every process
when they were spawned). Measured with the radix sorts (issue 15's seventeenth session; a
pass over a finished yolov8n run, six libraries and the fp64 reference, machine CPU and
wall, three alternating rounds): 2 inputs (535 MB, two processes) 7.8-8.3 CPU s and
4.3-4.9 s with them, 13.4-14.3 and 6.8-7.4 s without; 1 input (268 MB, one process)
1.7-1.8 CPU s and 1.2-1.4 s with them, 2.4-2.5 and 2.1-2.2 s without. Before the radix
sorts they paid from ~1 GB only (2 inputs: 4.5-5.0 CPU s with, 4.6-4.8 without). The
1-input saving less the load, scaled, breaks even near 150 MB; 200 MB keeps a margin."""


PRELOAD = ("anpred.pipeline.collect_pool",)
"""Modules the fork server imports before any process forks from it."""

PRELOAD_COMPILED = ("anpred.pipeline.pool_preload",)
"""Also imported there when the pass uses the compiled loops: it loads them (a fork server
takes its preload list when it starts)."""


def _preload(compiled: bool) -> tuple[str, ...]:
    return PRELOAD + (PRELOAD_COMPILED if compiled else ())


def warm_fork_server(
    run_dir: Path,
    participants: Sequence[str],
    reference64: str,
    input_ids: Sequence[str],
    processes: int,
    also: Sequence[str] = (),
) -> None:
    """Start the fork server of the coming pass now, while the last workers still run, and
    keep it for the run (:mod:`anpred.fork_server`; the run stops it).

    Called when the last worker has started (:func:`anpred.execution.pool.run_workers`'s
    ``when_idle``): the server imports the analysis and loads the compiled loops (~1.5 CPU
    s) beside the last workers instead of at the start of the pass, where it held up the
    pass with one core idle; the pass then forks its processes at once. ``also``: more
    modules for it to import (the report's plotting).
    Which loops to load is judged from the captures written so far (the first input's, of
    the participants that have it, scaled to all of them); the pass decides again from the
    finished captures (a wrong guess costs speed, not numbers). Nothing when the pass will
    not use processes, when the loops are not compiled yet (the pass compiles them first),
    or when anything fails: getting ready must never disturb the run.
    """
    try:
        input_ids = list(input_ids)
        if processes < 2 or len(input_ids) < 2:
            return
        store = RunStore(run_dir)
        names = [reference64, *participants]
        present = [p for p in names if store.participant(p).arrays_path(input_ids[0]).exists()]
        if not present:
            return
        per_input = _capture_bytes(run_dir, present, input_ids[0]) * len(names) / len(present)
        work = per_input * len(input_ids)
        if work < MIN_BYTES:
            return
        compiled = work >= COMPILED_MIN_BYTES
        if compiled:
            loops = onepass.kernels()
            if loops is None or not loops.cached():
                return
        fork_server.start(_preload(compiled) + tuple(also), keep=True)
    except Exception:  # noqa: BLE001 - see above
        return


def _capture_bytes(run_dir: Path, participants: Sequence[str], input_id: str) -> int:
    store = RunStore(run_dir)
    total = 0
    for p in participants:
        path = store.participant(p).arrays_path(input_id)
        if path.exists():
            total += path.stat().st_size
    return total


@dataclass(frozen=True)
class PassTask:
    """What a pass collects, but the inputs, and whether it uses the compiled loops: two
    passes with equal tasks give the same records for an input, the same way.
    """

    collection: Collection
    compiled: bool

    def submit(self, pool: ProcessPoolExecutor, input_id: str) -> Future[RunEvidence | None]:
        """Collect ``input_id`` in ``pool``."""
        return pool.submit(_one, self.collection, input_id, self.compiled)


Started = tuple[ProcessPoolExecutor, dict[str, "Future[RunEvidence | None]"]]
"""A pool and the inputs submitted to it."""


def new_pool(processes: int, compiled: bool) -> ProcessPoolExecutor:
    """A pool of up to ``processes`` analysing processes, forked from the fork server."""
    return ProcessPoolExecutor(
        max_workers=processes,
        mp_context=fork_server.context(_preload(compiled)),
        initializer=fork_server.init_helper,
    )


def _one(collection: Collection, input_id: str, compiled: bool) -> RunEvidence | None:
    """One input's records; ``None`` when collecting it failed (the driver collects it
    again and raises what the one pass raises: no exception has to travel back).
    ``compiled``: whether to use the compiled loops (:data:`COMPILED_MIN_BYTES`).
    """
    onepass.use_compiled(compiled)
    try:
        return collection.collect([input_id], quiet)
    except Exception:  # noqa: BLE001 - see above
        return None


def collect_inputs(
    collection: Collection,
    input_ids: Sequence[str],
    say: Say,
    processes: int = 1,
    early: EarlyPass | None = None,
) -> RunEvidence:
    """:func:`~anpred.pipeline.evidence.collect`, in up to ``processes`` processes.

    Args:
        collection: What the pass collects (the run, participants, anchors, parameters).
        input_ids: The inputs to collect, in the run's order.
        say: Progress (a line per input, as the inputs finish).
        processes: Processes at most (the run's ``--parallel``); 1: this process only.
        early: Inputs a run began to analyse while its last workers ran: the pass takes
            over their processes and results when they were collected as it collects them
            (same participants, anchors, parameters and loops), else it stops them.

    Returns:
        The records, as one pass over ``input_ids`` in order gathers them.
    """
    input_ids = list(input_ids)
    processes = min(processes, len(input_ids))
    work, compiled = plan_pass(collection.run_dir, collection.names, input_ids)
    previous = onepass.use_compiled(compiled)
    try:
        if compiled:
            onepass.prepare(say)  # compiled here once, then loaded by every process
        if processes < 2 or work < MIN_BYTES:
            return collection.collect(input_ids, say)
        task = PassTask(collection, compiled)
        started = early.hand_over(task) if early is not None else None
        return _in_processes(task, input_ids, say, processes, started)
    finally:
        if early is not None:
            early.close()  # what it did not hand over is of no use
        onepass.use_compiled(previous)


def plan_pass(run_dir: Path, names: Sequence[str], input_ids: Sequence[str]) -> tuple[int, bool]:
    """What a pass over ``input_ids`` will read (the first input's captures of ``names``, on
    disk, times the inputs) and whether it uses the compiled loops (:data:`COMPILED_MIN_BYTES`).
    """
    work = _capture_bytes(run_dir, names, input_ids[0]) * len(input_ids) if input_ids else 0
    # kernels(): what this process may use (numba installed, no ANPRED_NO_JIT) the
    # processes use too, whatever the fork server's environment was
    return work, work >= COMPILED_MIN_BYTES and onepass.kernels() is not None


def _in_processes(
    task: PassTask,
    input_ids: list[str],
    say: Say,
    processes: int,
    started: Started | None = None,
) -> RunEvidence:
    """:func:`collect_inputs` in ``processes`` processes, one input per task; ``started``:
    a pool and the inputs already submitted to it (an early pass's).
    """
    early = {f: i for i, f in started[1].items() if i in input_ids} if started else {}
    ahead = f" ({len(early)} begun while the last workers ran)" if early else ""
    say(f"  analyse {len(input_ids)} inputs in {processes} processes{ahead}")
    parts: dict[str, RunEvidence] = {}
    pool: ProcessPoolExecutor | None = None
    try:
        futures: dict[Future[RunEvidence | None], str] = dict(early)
        pool = started[0] if started is not None else new_pool(processes, task.compiled)
        submitted = set(futures.values())
        futures.update({task.submit(pool, i): i for i in input_ids if i not in submitted})
        for future in as_completed(futures):
            input_id, records = futures[future], future.result()
            if records is not None:
                parts[input_id] = records
                say(f"  analysed input {len(parts)}/{len(input_ids)}: {input_id}")
    except Exception:  # noqa: BLE001 - a process died: what it left is collected here
        pass
    except BaseException:  # Ctrl-C, SIGTERM: stop the processes now, not after their input
        if pool is not None:
            # the executor has no public way to stop its processes before Python 3.14
            for process in list(getattr(pool, "_processes", {}).values()):
                process.terminate()
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
            fork_server.release()  # unless a run keeps it for its report
    for i in input_ids:  # one input per part, as above: the merge keeps the run's order
        if i not in parts:
            parts[i] = task.collection.collect([i], say)
    return merge([parts[i] for i in input_ids], input_ids)
