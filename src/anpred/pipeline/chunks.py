"""Runs that go a chunk of inputs at a time (``--chunk N``): peak disk bounded by the chunk.

A run writes every participant's captures of every input before its analysis reads them
(the consensus of an anchor needs every participant's array at once, and participants run
one after another), so without chunks its disk peaks at all of them: yolov8n with six
libraries writes ~280 MB per input, 36 GB for 128 inputs. With ``--keep-captures needed``
(the default) and more inputs than ``--chunk`` (default :data:`DEFAULT_CHUNK`), the run
instead goes chunk by chunk:

1. every participant's worker runs on the chunk's inputs (the fp64 reference first in line,
   as in one go; a resumed run skips what is done);
2. the chunk is analysed: the same streaming pass as the whole run's
   (:func:`~anpred.pipeline.evidence.collect`, one input at a time), its records written
   as the chunk's statistics (``chunks/``, :mod:`anpred.store.pruning`);
3. the chunk's captures are pruned to what may be needed later: the first input of the
   run whole, and on every other input the anchors where some participant is a candidate
   finding (:func:`~anpred.analysis.oracle.noise_candidates`: above its noise threshold,
   non-finite, or an introduced error above its threshold -- judged per input, a superset
   of the findings the whole run's judgement can make); the fp64 reference's too (stage
   isolation read them while the chunk ran; the drill-down computes the stage inputs it
   needs again, :func:`anpred.pipeline.drill.run_drill`).

The run's analysis then merges the chunks' statistics
(:func:`~anpred.pipeline.statistics.merge`: the same records, in the same order, as one
pass over all inputs) instead of reading captures, judges as always, and the final prune
(:mod:`anpred.pipeline.prune`) removes what is not needed by the findings. Peak disk is
about one chunk of every participant's captures plus the first input and the candidates
kept, whatever the number of inputs; findings and drill-down are those of a run in one go
(``tests/pipeline/test_chunks.py``).

Failures: after a participant fails in a chunk (crash, timeout, error), it is left out of
the later chunks (a hang is not waited for chunk after chunk), and from that chunk on
nothing is analysed or pruned early: the run's analysis reads those inputs' captures, as
in one go, so a resumed run retries the failed participant on them. Workers persist
across chunks: each participant's worker process serves its job of every chunk
(:func:`~anpred.execution.pool.served_workers`), on the model it loaded, translated and
compiled for the first one (restarting them cost ~12.7 CPU s per chunk for seven workers,
issue 15); they stay alive, idle, between their jobs, so a chunked run holds every
participant's worker in memory, not ``--parallel`` of them. The observer check still
covers the run's first inputs only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from anpred.analysis.oracle import OracleParams, noise_candidates
from anpred.errors import UsageError
from anpred.execution.pool import WorkerResult, served_workers
from anpred.participants import REFERENCE32, Participant
from anpred.pipeline.evidence import Collection, RunEvidence
from anpred.progress import Remaining, Say, quiet
from anpred.settings import DEFAULT_CHUNK, KEEP_NEEDED  # noqa: F401 (DEFAULT_CHUNK: read here)
from anpred.store import CAPTURE, ISOLATED, RunStore, Status
from anpred.store.pruning import has_statistics, read_prune_record, write_prune_record

#: Environment switch (``1``): a fresh worker process per participant and chunk, as before
#: workers persisted (what ``benchmarks/bench_chunks.py`` compares the served ones with).
FRESH_WORKERS_ENV = "ANPRED_FRESH_CHUNK_WORKERS"

if TYPE_CHECKING:
    from anpred.pipeline.early_pass import EarlyPass

#: Runs the workers of some participants on some inputs (``run.execute`` with its settings),
#: with the early pass of those inputs when there is one (:mod:`anpred.pipeline.early_pass`).
Execute = Callable[[list[str], list[Participant], "EarlyPass | None"], dict[str, WorkerResult]]

#: The early pass of a chunk's inputs, set as the chunk's analysis collects them, or ``None``.
EarlyFor = Callable[[list[str]], "EarlyPass | None"]


def check_chunk(size: int) -> int:
    """Validate ``--chunk`` (0: no chunks).

    Raises:
        UsageError: Negative.
    """
    if size < 0:
        raise UsageError(f"--chunk takes a number of inputs >= 1, or 0 for none; got {size}")
    return size


def chunked(size: int, n_inputs: int, keep_captures: str) -> bool:
    """Whether a run goes in chunks: ``needed`` captures and more inputs than a chunk."""
    return keep_captures == KEEP_NEEDED and 0 < size < n_inputs


def plan(input_ids: Sequence[str], size: int, covered: Sequence[str] = ()) -> list[list[str]]:
    """The chunks still to run: the inputs not ``covered`` yet, in order, ``size`` at a time."""
    done = set(covered)
    todo = [i for i in input_ids if i not in done]
    return [todo[k : k + size] for k in range(0, len(todo), size)]


def covered_inputs(store: RunStore) -> list[str]:
    """Inputs whose chunk was analysed already (its statistics are written)."""
    from anpred.pipeline import statistics

    return [i for part in statistics.load_chunks(store) for i in part[3]]


def run_in_chunks(
    store: RunStore,
    execute: Execute,
    participants: Sequence[Participant],
    input_ids: Sequence[str],
    anchors: Sequence[str],
    size: int,
    params: OracleParams,
    say: Say,
    processes: int = 1,
    early_for: EarlyFor | None = None,
) -> dict[str, WorkerResult]:
    """Run, analyse and prune the run's inputs a chunk at a time; return every worker's
    result as one run in one go returns them (a failure stays the participant's result).
    A chunk's streaming pass uses up to ``processes`` processes
    (:mod:`anpred.pipeline.collect_pool`), and begins with the inputs its last workers
    have finished when ``early_for`` gives the chunk an early pass.
    """
    covered = covered_inputs(store)
    chunks = plan(input_ids, size, covered)
    previous = _recorded_results(store)
    results: dict[str, WorkerResult] = {}
    active = list(participants)
    healthy = not any(r.failed for r in previous.values())
    # a run judged already (resumed after its analysis) has its statistics, and no chunks'
    judged = has_statistics(store) and not covered
    position = {i: k for k, i in enumerate(input_ids)}
    names = [p.name for p in participants]
    if covered:
        say(f"chunks: {len(covered)} of {len(input_ids)} inputs analysed already (resumed)")
    remaining = Remaining(sum(map(len, chunks)))
    # each participant's worker serves every chunk, model loaded once (the benchmark's
    # switch FRESH_WORKERS_ENV starts fresh ones per chunk instead, benchmarks/bench_chunks.py)
    fresh = os.environ.get(FRESH_WORKERS_ENV) == "1"
    with nullcontext() if fresh else served_workers():
        for k, ids in enumerate(chunks):
            first, last = position[ids[0]] + 1, position[ids[-1]] + 1
            left = remaining.left()
            say(f"chunk {k + 1}/{len(chunks)}: inputs {first}-{last} of {len(input_ids)}"
                + (f" ({left})" if left else ""))  # fmt: skip
            early = early_for(ids) if early_for is not None and healthy and not judged else None
            try:
                got = execute(ids, active, early)
                results.update(got)
                failed = [n for n, r in got.items() if r.failed]
                if failed:
                    active = [p for p in active if p.name not in failed]
                    if healthy:
                        say(
                            f"chunk {k + 1}: {', '.join(failed)} failed; later chunks run without "
                            "it and are analysed at the end, nothing more is pruned early"
                        )
                    healthy = False
                store.write_participants(
                    {
                        n: r.to_dict()
                        for n, r in _merged(previous, results, store, input_ids).items()
                    }
                )
                if healthy and not judged:
                    _analyse_chunk(
                        store, names, anchors, ids, input_ids[0], params, say, processes, early
                    )
            finally:
                if early is not None:
                    early.close()  # a failed chunk is analysed at the end, without it
            remaining.step(len(ids))
    return _merged(previous, results, store, input_ids)


def _recorded_results(store: RunStore) -> dict[str, WorkerResult]:
    """The results recorded by an earlier invocation of this run (resume)."""
    fields = set(WorkerResult.__dataclass_fields__)
    return {
        name: WorkerResult(**{k: v for k, v in record.items() if k in fields})
        for name, record in store.read_participants().items()
    }


def _merged(
    previous: Mapping[str, WorkerResult],
    results: Mapping[str, WorkerResult],
    store: RunStore,
    input_ids: Sequence[str],
) -> dict[str, WorkerResult]:
    """Each participant's latest result, with the inputs it has done. A participant that
    failed in a chunk ran in no later one, so its failure is its latest result.
    """
    merged: dict[str, WorkerResult] = {}
    for name in [*previous, *(n for n in results if n not in previous)]:
        result = results.get(name) or previous[name]
        folder = store.participant(name)
        done = sum(folder.capture_done(i) for i in input_ids)
        merged[name] = replace(result, status=Status.parse(result.status), inputs_done=done)
    return merged


def _analyse_chunk(
    store: RunStore,
    names: Sequence[str],
    anchors: Sequence[str],
    ids: Sequence[str],
    first_input: str,
    params: OracleParams,
    say: Say,
    processes: int = 1,
    early: EarlyPass | None = None,
) -> None:
    """The chunk's streaming pass, its statistics, and the prune of its captures."""
    from anpred.pipeline import statistics
    from anpred.pipeline.collect_pool import collect_inputs

    ev = collect_inputs(Collection.of(store.root, names, anchors, params), ids, quiet,
                        processes, early)  # fmt: skip
    statistics.save_chunk(store, ev, params.metric_names(), names, ids)
    keep = candidate_anchors(ev, params, ids)
    freed, kept = prune_chunk(store, ids, keep, first_input)
    candidates = sum(len(a) for i, a in keep.items() if i != first_input)
    say(
        f"  analysed; {freed / 1e6:.1f} MB of captures pruned, {kept / 1e6:.1f} MB on disk "
        f"({candidates} candidate (input, anchor) pairs kept until the run is judged)"
    )


def candidate_anchors(
    ev: RunEvidence, params: OracleParams, input_ids: Sequence[str]
) -> dict[str, set[str]]:
    """Per input, the anchors where some participant is a candidate finding."""
    keep: dict[str, set[str]] = {i: set() for i in input_ids}
    for anchor, records in ev.evidence.items():
        introduced = {key: per[anchor] for key, per in ev.introduced.items() if anchor in per}
        floor = {i: v for (p, i), v in introduced.items() if p == REFERENCE32}
        found = noise_candidates(
            records, params, introduced=introduced or None, introduced_floor=floor
        )
        for _participant, input_id in found:
            keep.setdefault(input_id, set()).add(anchor)
    return keep


def prune_chunk(
    store: RunStore, ids: Sequence[str], keep: Mapping[str, set[str]], first_input: str
) -> tuple[int, int]:
    """Prune one chunk's captures to ``keep`` (the first input whole), the fp64 reference's
    too; record the bytes; return the bytes freed and those of every capture now.

    The fp64 reference's captures are read later only by the drill-down (the stage inputs
    of flagged stages), which computes the pruned ones again
    (:func:`anpred.pipeline.drill.run_drill`); kept whole, they were the run's peak disk
    (yolov8n: 44 MB per input, 12.6 GB at 128 inputs in chunks of 32).
    """
    from anpred.pipeline.prune import KEEP_NEEDED, capture_bytes, own_folders

    own, _linked = own_folders(store)
    before = capture_bytes(own)
    freed = 0
    for folder in own:
        for kind in (CAPTURE, ISOLATED):
            for input_id in ids:
                if input_id != first_input:
                    freed += folder.prune_capture(input_id, keep.get(input_id, set()), kind)
    after = capture_bytes(own)
    earlier: dict[str, Any] = read_prune_record(store) or {}
    freed_before = int(earlier.get("bytes_before", 0)) - int(earlier.get("bytes_after", 0))
    write_prune_record(
        store,
        {
            **earlier,
            "mode": KEEP_NEEDED,
            "chunked": True,
            "bytes_before": freed_before + before,
            "bytes_after": after,
        },
    )
    return freed, after


def chunk_statistics(
    store: RunStore,
    names: Sequence[str],
    anchors: Sequence[str],
    input_ids: Sequence[str],
    params: OracleParams,
    say: Say,
) -> tuple[RunEvidence, tuple[str, ...]] | None:
    """A chunked run's records: its chunks' statistics merged, and a streaming pass over the
    inputs no chunk analysed (after a failure); ``None`` when the run has no chunks.

    Raises:
        UsageError: The chunks were analysed with other participants or metrics.
    """
    from anpred.pipeline import statistics

    parts = statistics.load_chunks(store)
    if not parts:
        return None
    for _ev, metrics, covered, _inputs in parts:
        if list(covered) != list(names) or list(metrics) != list(params.metric_names()):
            raise UsageError(
                f"{store.root}: its chunks were analysed with participants {covered} and "
                f"metrics {list(metrics)}; re-run it into a new --out"
            )
    done = {i for part in parts for i in part[3]}
    rest = [i for i in input_ids if i not in done]
    evs = [part[0] for part in parts]
    if rest:
        say(f"  {len(done)} inputs from their chunks' statistics, {len(rest)} from captures")
        evs.append(Collection.of(store.root, names, anchors, params).collect(rest, say))
    return statistics.merge(evs, input_ids), tuple(params.metric_names())
