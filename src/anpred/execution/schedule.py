"""Which workers run, in which order and groups, and which a resumed run reuses.

:func:`resume_workers` runs the participants that have not finished in a run directory
yet (:func:`~anpred.execution.pool.run_workers`) and reuses the others;
:func:`heavier_first` orders them so that the slow starters start first;
:func:`worker_groups` says whether the fp64 reference runs in line with the others or
before them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from anpred.errors import UsageError
from anpred.execution.executor import LocalExecutor
from anpred.execution.pool import WorkerResult, run_workers
from anpred.library import get_library
from anpred.library.descriptor import Loads
from anpred.participants import Participant
from anpred.settings import ExecutionSettings
from anpred.store import ISOLATED, RunStore, Status, Step


def finished_worker(
    run_dir: Path, participant: Participant, input_ids: Sequence[str], isolation: bool
) -> WorkerResult | None:
    """The result of a participant that already finished ``input_ids`` in ``run_dir``
    (resume), or ``None``.
    """
    folder = RunStore(run_dir).participant(participant.name)
    if not folder.has_status():
        return None
    data = folder.read_status()
    state = Status.parse(data.get("state"))
    n_inputs = len(input_ids)
    done = sum(folder.capture_done(i) for i in input_ids)
    iso = sum(folder.capture_done(i, ISOLATED) for i in input_ids)
    if not state.finished or done < n_inputs or (isolation and iso < n_inputs):
        return None
    return WorkerResult(
        participant.name,
        participant.library,
        state,
        Step.DONE,
        "",
        data.get("version", ""),
        data.get("settings", {}),
        data.get("timings", {}),
        0,
        done,
    )


def resume_workers(
    run_dir: Path,
    participants: Sequence[Participant],
    job: Mapping[str, Any],
    input_ids: Sequence[str],
    settings: ExecutionSettings,
    *,
    isolation_source: Path | None = None,
    reference: Participant | None = None,
    when_idle: Callable[[], None] | None = None,
    on_tail: Callable[[int], None] | None = None,
) -> dict[str, WorkerResult]:
    """Run the participants that have not finished in ``run_dir`` yet; reuse the others.

    ``settings`` (resolved) say how the workers run and where progress goes.
    ``reference``: the participant that writes ``isolation_source`` (the fp64 reference),
    run with the others instead of before them (see
    :func:`~anpred.execution.pool.run_workers`); it is reused when it finished, like any
    participant. ``when_idle``, ``on_tail``: see :func:`~anpred.execution.pool.run_workers`.
    """

    def progress(name: str, message: str) -> None:
        settings.say(f"  [{name}] {message}")

    results: dict[str, WorkerResult] = {}
    todo = []
    if reference is not None:
        done = finished_worker(run_dir, reference, input_ids, False)
        if done is not None:
            results[reference.name] = done
            progress(reference.name, "already done (resumed)")
            reference = None
    for p in participants:
        done = finished_worker(run_dir, p, input_ids, isolation_source is not None)
        if done is not None:
            results[p.name] = done
            progress(p.name, "already done (resumed)")
        else:
            todo.append(p)
    if todo or reference is not None:
        results.update(
            run_workers(
                run_dir,
                todo,
                job,
                input_ids,
                settings,
                isolation_source=isolation_source,
                progress=progress,
                reference=reference,
                when_idle=when_idle,
                on_tail=on_tail,
            )
        )
    return results


#: Scheduling weight of a participant by how its library loads the model: a converted
#: artifact (conversion) and a translated graph (translation, tracing, compilation) start
#: slower than a native module, which starts slower than an ONNX file. Measured worker
#: times (yolov8n, 8 inputs, two at a time): jax 16.3 s, tensorflow 16.1, torch 9.2,
#: paddle 8.6, openvino 5.0, onnxruntime 4.0 (benchmarks/bench_run.py).
_WEIGHT = {
    Loads.CONVERTED_ARTIFACT: 3,
    Loads.TRANSLATED_ONNX: 2,
    Loads.NATIVE_MODULE: 1,
    Loads.ONNX_FILE: 0,
}


def heavier_first(participants: Sequence[Participant]) -> list[Participant]:
    """The order to start workers in: the slower libraries first, the user's order among
    equals (longest jobs first leaves the fewest idle slots at the end of a run; the run's
    results keep the user's order). Unknown libraries count as the heaviest.
    """

    def weight(p: Participant) -> int:
        try:
            return _WEIGHT.get(get_library(p.library).loads, 3)
        except UsageError:
            return 3

    return sorted(participants, key=lambda p: -weight(p))


#: One group of workers: (participants, isolation source, the reference run in line).
WorkerGroup = tuple[list[Participant], Path | None, Participant | None]


def worker_groups(
    reference: Participant,
    scheduled: list[Participant],
    source: Path | None,
    settings: ExecutionSettings,
) -> list[WorkerGroup]:
    """The workers' groups, run one after the other: ``(participants, isolation source,
    the reference run in line with them)``.

    Where the workers share this file system (local processes), the fp64 reference runs
    first in line with the others, which wait for its captures when they isolate: the
    run does not wait, with ``parallel - 1`` slots idle, for the reference alone. Measured
    (yolov8n, 8 inputs, 6 libraries, ``--parallel 2``): the reference alone took 13 % of
    the run's wall time (benchmarks/bench_run.py). Elsewhere (Ray) it runs before them,
    since a job ships the reference's captures when it starts; without stage isolation
    nobody needs its captures, and it runs in line with the others everywhere (first: it
    is among the longest jobs).

    Args:
        reference: The fp64 reference.
        scheduled: The other participants, in the order to start them.
        source: The reference's capture folder when the run isolates stages, else ``None``.
        settings: Where the workers run (``executor``; ``None``: local processes).
    """
    if source is None:  # no isolation: nobody waits for the reference's captures
        return [([reference, *scheduled], None, None)]
    if shares_files(settings):
        return [(scheduled, source, reference)]  # the reference with the others
    return [([reference], None, None), (scheduled, source, None)]


def shares_files(settings: ExecutionSettings) -> bool:
    """Whether the workers write to this file system (local processes), so that the
    driver sees their captures while they run.
    """
    return settings.executor is None or isinstance(settings.executor, LocalExecutor)
