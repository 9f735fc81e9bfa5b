"""Fault runs: a run directory made from a model's clean run plus one faulty participant.

Clean participants are deterministic, so a fault's run reuses the clean run's captures
(linked, not copied) and executes only the faulty participant (:func:`derive_run`). The
fault's directory is a complete run directory (``anpred report`` renders it); its analysis
is the same ``analyse`` every run gets, run as a Ray task when the campaign runs on Ray
(:func:`analyse_run`).

Locally, the fault runs are served (:data:`SERVED`, the default): one process per faulty
library runs every fault run of the model in turn (:mod:`anpred.execution.served`),
paying imports once; its worker recomputes only the anchors the fault reaches, fed the
clean participant's captures of the others (:mod:`anpred.execution.resumed`); and each
run's analysis reads only what its fault changed (:mod:`anpred.evaluation.fault_analysis`:
the clean run's records before the faulty stage, and the other participants' own records
from it on). :data:`FRESH` is the path before it: one worker process per fault run, the
whole faulty model, and a pass over every capture (``anpred eval --fault-workers fresh``).
The two give the same captures, rows and deviations (tests/execution/test_served.py,
tests/execution/test_resumed.py, tests/evaluation/test_campaign_served.py,
tests/evaluation/test_fault_analysis.py); a resumed worker does not repeat the observer
check, which the clean run made on its graph.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import onnx

from anpred import fork_server
from anpred.analysis import sorted_cache
from anpred.errors import AnpredError
from anpred.evaluation.fault_analysis import reuse_clean_records
from anpred.evaluation.grid import EvalGrid, sample_nodes
from anpred.evaluation.results import ResultsFolder, fault_key
from anpred.evaluation.scoring import fault_outcome, fault_row
from anpred.execution import schedule
from anpred.execution.executor import Executor, LocalExecutor
from anpred.execution.job import RESUME_KEY
from anpred.execution.resumed import DEFERRED_GRAPHS_KEY
from anpred.inject.participants import EXTRA_KEY, faulty_participant
from anpred.inject.plan import plan_fault, stage_anchors
from anpred.inject.spec import FaultSpec
from anpred.inject.stages import resolve_targets
from anpred.inject.transforms import deferred_graphs
from anpred.interchange.export import AnchoredExport
from anpred.interchange.loaded import load_shared
from anpred.interchange.resume import footprint
from anpred.participants import (
    REFERENCE32,
    REFERENCE64,
    Participant,
    ideal_participants,
    parse_participant,
    parse_participants,
)
from anpred.pipeline.analyse import analyse
from anpred.pipeline.collect_pool import warm_fork_server
from anpred.pipeline.early_pass import EarlyPass, for_run
from anpred.pipeline.execute import model_job
from anpred.pipeline.transforms import MODEL_FOLDER, plan_transforms
from anpred.progress import Remaining, Say
from anpred.settings import ExecutionSettings
from anpred.store import EvalStore, RunStore, safe_name
from anpred.store.summary import Summary

#: ``--fault-workers``: one served process per library runs the fault runs in turn.
SERVED = "served"
#: ``--fault-workers``: one fresh worker process per fault run.
FRESH = "fresh"
FAULT_WORKERS = (SERVED, FRESH)


def analyse_run(
    run_dir: Path,
    executor: Executor | None,
    processes: int = 1,
    early: EarlyPass | None = None,
) -> Summary:
    """Analyse a run directory: on the Ray cluster of a Ray ``executor`` (a task on any
    node, results brought back into ``run_dir``), else here, in up to ``processes``
    processes, taking over what ``early`` began. Same result.
    """
    from anpred.execution.ray_executor import RayExecutor  # imports no Ray by itself

    if isinstance(executor, RayExecutor):
        return executor.analyse(run_dir, analyse)
    return analyse(run_dir, processes=processes, early=early)


def derive_run(
    base: Path,
    out: Path,
    model: str,
    add: list[Participant],
    drop: str | None,
    options: dict[str, Any],
    threads: int,
    parallel: int = 1,
    reanalyse: bool = False,
    say: Say | None = None,
    executor: Executor | None = None,
    keep_fork_server: bool = False,
    reuse: Callable[[], bool] | None = None,
    resume: Mapping[str, Mapping[str, Any]] | None = None,
) -> Summary:
    """A run directory made from the clean run ``base`` plus participants ``add``.

    The clean run's participants (but ``drop``) are linked, not re-run: they are
    deterministic. Only ``add`` runs (on ``executor``; default: local processes), then the
    whole directory is analysed as any run. Resumable: a finished directory is read back
    (``reanalyse``: judged again from its captures, e.g. after changing the oracle).
    ``keep_fork_server``: leave the analysis's fork server running for the next run (the
    caller stops it; the fault runs of one model analyse alike). ``reuse``: called once the
    added workers succeeded, before the analysis; it may write the run's records from the
    clean run's (:func:`~anpred.evaluation.fault_analysis.reuse_clean_records`). ``resume``:
    per added participant, what its worker takes from the clean run's captures
    (:data:`~anpred.execution.job.RESUME_KEY`).
    """
    done = RunStore(out)
    if done.has_summary():
        done.check_format()
        if not reanalyse:
            return Summary.from_dict(done.read_summary())
        calibration = RunStore.open(base).read_calibration()
        if calibration is not None:  # judged with the clean run's thresholds, as new runs are
            done.write_calibration(calibration)
        summary = analyse_run(out, executor)
        done.write_summary(summary.to_dict())
        return summary
    base_store = RunStore.open(base)
    export = AnchoredExport.from_dict(base_store.read_export())
    workers = base_store.read_participants()
    store = RunStore.derive(out, base_store, [n for n in workers if n != drop], options)
    job = model_job(
        export,
        model,
        options.get("weights"),
        options.get("seed", 0),
        store.inputs_path,
        plan_transforms(
            options.get("extra") or {},
            export,
            out,
            deferred=[n for n, plan in (resume or {}).items() if DEFERRED_GRAPHS_KEY in plan],
        ),
    )
    if resume:
        job[RESUME_KEY] = {name: dict(plan) for name, plan in resume.items()}
    input_ids = base_store.read_input_ids()
    merged = {k: v for k, v in workers.items() if k != drop}
    names = [n for n in {**merged, **{p.name: None for p in add}} if n != REFERENCE64]
    settings = ExecutionSettings(
        threads=threads, parallel=parallel, executor=executor, say=say or (lambda _m: None)
    )
    local = schedule.shares_files(settings)
    # locally, the run's inputs are analysed as the added participants finish them, in the
    # slots they leave free (the clean participants ran already), from a fork server
    # started beside them
    # (not when ``reuse`` may spare the analysis most of them)
    ahead = local and reuse is None
    early = for_run(out, names, input_ids, parallel, isolation=True) if ahead else None
    try:
        results = schedule.resume_workers(
            out,
            add,
            job,
            input_ids,
            settings,
            isolation_source=store.participant(REFERENCE64).folder,
            when_idle=partial(warm_fork_server, out, names, REFERENCE64, input_ids, parallel)
            if ahead
            else None,
            on_tail=early.tick if early is not None else None,
        )
        merged.update({name: result.to_dict() for name, result in results.items()})
        store.write_participants(merged)
        if reuse is not None and local and not any(r.failed for r in results.values()):
            _reuse(store, reuse)
        summary = analyse_run(out, executor, parallel, early)
    finally:
        if early is not None:
            early.close()
        if not keep_fork_server:
            fork_server.stop()  # kept from the workers' tail for the analysis
    store.write_summary(summary.to_dict())
    return summary


def _reuse(store: RunStore, reuse: Callable[[], bool]) -> None:
    """Run ``reuse``; any failure leaves the analysis to read every capture."""
    from anpred.store.pruning import remove_chunk_statistics

    try:
        reuse()
    except Exception:  # noqa: BLE001 - a shortcut only: the full pass gives the same records
        remove_chunk_statistics(store)


def run_fault(
    base: Path,
    fault_dir: Path,
    model: str,
    library: str,
    spec: FaultSpec,
    clean: Summary,
    say: Say,
    threads: int,
    reanalyse: bool = False,
    executor: Executor | None = None,
    parallel: int = 1,
    skipped: Callable[[str], None] | None = None,
    keep_fork_server: bool = False,
    reuse_clean: bool = False,
    resume: bool = False,
) -> dict[str, Any] | None:
    """Run one faulty participant against the clean run ``base``; return its row
    (``parallel``: processes of its analysis, beside the faulty worker and after it;
    ``None``, said and given to ``skipped``, when the fault matches no node of its stage;
    ``keep_fork_server``: see :func:`derive_run`; ``reuse_clean``: its records before the
    faulty stage are the clean run's where its captures there are,
    :mod:`anpred.evaluation.fault_analysis`; ``resume``: its worker recomputes only the
    anchors the fault reaches, from the clean participant's captures,
    :mod:`anpred.execution.resumed`).
    """
    base_store = RunStore.open(base)
    export = AnchoredExport.from_dict(base_store.read_export())
    faulty = faulty_participant(parse_participant(library), spec)
    clean_name = parse_participant(library).name
    plans: dict[str, dict[str, Any]] = {}
    if not RunStore(fault_dir).has_summary():
        try:
            anchored = load_shared(export.anchored_path)  # planned on once per model
            planned = plan_fault(spec, export, anchored)
        except AnpredError as err:
            say(f"  skip {faulty.name}: {err}")
            if skipped is not None:
                skipped(str(err))
            return None
        if resume:
            source = base_store.participant(clean_name).folder
            plans[faulty.name] = resume_plan(anchored, export, planned.nodes, source)
            folder = RunStore(fault_dir).participant(faulty.name).folder / MODEL_FOLDER
            graphs = deferred_graphs(library, spec, export, folder, planned.nodes)
            if graphs is not None:  # its worker rewrites them
                plans[faulty.name][DEFERRED_GRAPHS_KEY] = graphs
    options = base_store.read_settings()
    options["extra"] = {EXTRA_KEY: {library: spec.to_dict()}}
    reuse = (
        partial(reuse_clean_records, base, fault_dir, clean_name, faulty.name, spec.stage)
        if reuse_clean
        else None
    )
    summary = derive_run(
        base,
        fault_dir,
        model,
        [faulty],
        clean_name,
        options,
        threads,
        parallel,
        reanalyse=reanalyse,
        executor=executor,
        keep_fork_server=keep_fork_server,
        reuse=reuse,
        resume=plans,
    )
    return fault_row(summary, clean, model, library, faulty.name, spec)


def resume_plan(
    anchored: onnx.ModelProto, export: AnchoredExport, nodes: Sequence[str], source: Path
) -> dict[str, Any]:
    """What a faulty worker takes from the clean participant's captures in ``source``: it
    recomputes the anchors that depend on the faulty ``nodes``, anchored and stage-isolated
    (:func:`~anpred.interchange.resume.footprint`), and takes the others.
    """
    names = [a.onnx_name for a in export.anchors]
    key = {a.onnx_name: a.key for a in export.anchors}
    return {
        "source": str(source),
        "changed": [key[n] for n in footprint(anchored, names, nodes, isolated=False)],
        "isolated": [key[n] for n in footprint(anchored, names, nodes, isolated=True)],
    }


def fault_name(lib: str, spec: FaultSpec) -> str:
    """The run directory name of one fault run."""
    return safe_name(
        f"{lib}!{spec.label}-s{spec.severity}-{spec.op.replace('*', 'all')}"
        + (f"-{spec.node}" if spec.node else "")
    )


def fault_list(
    grid: EvalGrid, model: str, base: Path, stages: Sequence[str]
) -> list[tuple[str, FaultSpec]]:
    """Every (faulty participant, fault) of one model, in campaign order: per participant,
    axis, severity and stage; an axis with ``nodes`` gives one single-node fault per drawn
    node (:func:`~anpred.evaluation.grid.sample_nodes`).
    """
    anchored = None
    faults = []
    for lib in grid.faulty:
        for axis in grid.faults:
            for severity in axis.severities:
                for stage in stages:
                    spec = {"stage": stage, "op": axis.op, "kind": axis.kind, "severity": severity}
                    if axis.partial is not None:
                        spec["partial"] = axis.partial
                    if not axis.nodes:
                        faults.append((lib, FaultSpec.from_dict(spec)))
                        continue
                    if anchored is None:
                        anchored = _anchored(base)
                    for node in _nodes(anchored, FaultSpec.from_dict(spec), model, axis.nodes):
                        faults.append((lib, FaultSpec.from_dict({**spec, "node": node})))
    return faults


def _anchored(base: Path) -> tuple[Any, Any]:
    """The clean run's anchored ONNX model and its stage anchors."""
    export = AnchoredExport.from_dict(RunStore.open(base).read_export())
    return load_shared(export.anchored_path), stage_anchors(export)


def _nodes(anchored: tuple[Any, Any], spec: FaultSpec, model: str, k: int) -> list[str]:
    try:
        targets = resolve_targets(anchored[0], anchored[1], spec)
    except AnpredError:
        return []  # the kind matches no node of this stage: nothing to draw
    return sample_nodes(targets, k, f"{model}|{spec.stage}|{spec.kind}|{spec.op}")


def run_configurations(
    base: Path,
    out: Path,
    model: str,
    configurations: Sequence[str],
    threads: int,
    parallel: int,
    reanalyse: bool = False,
    say: Say | None = None,
    executor: Executor | None = None,
) -> Summary:
    """The real-configuration study of one model: its clean run plus ``configurations``."""
    options = RunStore.open(base).read_settings()
    options["libs"] = [*options["libs"], *configurations]
    participants = parse_participants(list(configurations))
    # the ideal references of the configurations' precision classes (library/precision.py)
    participants += ideal_participants(participants, list(RunStore.open(base).read_participants()))
    return derive_run(
        base, out, model, participants, None, options, threads, parallel, reanalyse, say, executor
    )


def run_faults(
    base: Path,
    folders: EvalStore,
    model: str,
    faults: Sequence[tuple[str, FaultSpec]],
    clean: Summary,
    say: Say,
    threads: int,
    parallel: int,
    reanalyse: bool = False,
    executor: Executor | None = None,
    kept: ResultsFolder | None = None,
    skip: Callable[[str, FaultSpec], bool] | None = None,
    fault_workers: str = SERVED,
) -> list[dict[str, Any]]:
    """Every fault run of one model (``(library, fault)`` pairs); their rows, in order.

    Locally they run one by one, their workers served (``fault_workers``: :data:`SERVED`,
    or :data:`FRESH`); with a distributed ``executor``, up to ``parallel`` at once.
    Each row (or skip) is recorded in ``kept`` as its run ends; the faults ``skip`` names
    (recorded earlier) are not run (numbered among all the same).
    """

    def one(index: int, lib: str, spec: FaultSpec) -> dict[str, Any] | None:
        name = fault_name(lib, spec)
        say(
            f"== {model}: fault {index}/{len(faults)}: {lib} {spec.label} "
            f"op={spec.op} severity={spec.severity}"
        )
        start = time.monotonic()
        reasons: list[str] = []
        row = run_fault(
            base,
            folders.fault_run(model, name),
            model,
            lib,
            spec,
            clean,
            say,
            threads,
            reanalyse,
            served,
            parallel if local else 1,  # distributed: the fault runs share the slots
            reasons.append,
            keep_fork_server=local and fault_workers == SERVED,
            reuse_clean=local and fault_workers == SERVED,  # fresh: the full pass, as before
            resume=local and fault_workers == SERVED,  # fresh: the whole model, as before
        )
        if kept is not None and (row is not None or reasons):
            kept.add(model, fault_key(lib, spec), row, reasons[0] if reasons else "")
        remaining.step()
        if row is not None:
            seconds = time.monotonic() - start
            left = remaining.left()
            say(f"   fault {index}/{len(faults)}: {fault_outcome(row)} ({seconds:.0f} s"
                + (f"; {left})" if left else ")"))  # fmt: skip
        return row

    local = executor is None or isinstance(executor, LocalExecutor)
    todo = [
        (i, lib, spec)
        for i, (lib, spec) in enumerate(faults, 1)
        if lib != REFERENCE32 and (skip is None or not skip(lib, spec))
    ]
    remaining = Remaining(len(todo))
    if local:
        with fault_executor(executor, fault_workers) as served:
            rows = [one(*item) for item in todo]
    else:
        served = executor
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max(1, parallel), thread_name_prefix="anpred-fault") as pool:
            rows = list(pool.map(lambda item: one(*item), todo))
    return [row for row in rows if row is not None]


@contextmanager
def fault_executor(executor: Executor | None, fault_workers: str) -> Iterator[Executor | None]:
    """Where a model's fault runs execute their faulty workers: ``executor`` itself, or,
    locally with :data:`SERVED`, processes that serve them in turn (closed at the end, with
    the analysis's fork server, which the fault runs then keep for one another).
    """
    if fault_workers not in FAULT_WORKERS:
        raise AnpredError(f"fault workers {fault_workers!r}: one of {', '.join(FAULT_WORKERS)}")
    if fault_workers == FRESH or not (executor is None or type(executor) is LocalExecutor):
        yield executor
        return
    from anpred.execution.served import ServedExecutor

    try:
        fork_server.hold()  # a pass that forks its processes (rare) leaves it to the next
        # the clean participants' sorted captures, from one fault run's pass to the next
        with ServedExecutor() as served, sorted_cache.kept():
            yield served
    finally:
        fork_server.stop()  # the fault runs kept it for one another (:func:`derive_run`)
