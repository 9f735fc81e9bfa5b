"""Run an evaluation grid: one clean run per model, then one faulty participant per fault.

Clean participants are deterministic, so a fault's run reuses the clean run's captures
(linked, not copied) and executes only the faulty participant — one worker per fault
instead of a whole ``anpred run``. The fault's directory is a complete run directory
(``anpred report`` renders it); its analysis is the same ``analyse`` every run gets, run as
a Ray task when the campaign runs on Ray (:func:`analyse_run`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import onnx

from anpred import fork_server
from anpred.errors import AnpredError
from anpred.evaluation.grid import EvalGrid, fp32_configurations, sample_nodes
from anpred.evaluation.results import ModelResult, ResultsFolder, fault_key, model_settings
from anpred.evaluation.scoring import fault_outcome, fault_row
from anpred.execution.executor import Executor, LocalExecutor
from anpred.inject.participants import EXTRA_KEY, faulty_participant
from anpred.inject.plan import plan_fault, stage_anchors
from anpred.inject.spec import FaultSpec
from anpred.inject.stages import resolve_targets
from anpred.interchange.export import AnchoredExport
from anpred.participants import (
    REFERENCE32,
    REFERENCE64,
    Participant,
    ideal_participants,
    parse_participant,
    parse_participants,
)
from anpred.pipeline.analyse import analyse
from anpred.pipeline.calibrate import attach, calibrate_run
from anpred.pipeline.calibration_cache import cache_calibration_run
from anpred.pipeline.collect_pool import warm_fork_server
from anpred.pipeline.early_pass import EarlyPass, for_run
from anpred.pipeline.options import RunOptions
from anpred.pipeline.prune import KEEP_ALL, KEEP_NEEDED, prune_runs
from anpred.pipeline.run import model_job, resume_workers, run
from anpred.pipeline.transforms import plan_transforms
from anpred.progress import Remaining, Say
from anpred.store import EvalStore, RunStore, safe_name
from anpred.store.summary import Summary

__all__ = ["ModelResult", "evaluate"]


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
) -> Summary:
    """A run directory made from the clean run ``base`` plus participants ``add``.

    The clean run's participants (but ``drop``) are linked, not re-run: they are
    deterministic. Only ``add`` runs (on ``executor``; default: local processes), then the
    whole directory is analysed as any run. Resumable: a finished directory is read back
    (``reanalyse``: judged again from its captures, e.g. after changing the oracle).
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
        plan_transforms(options.get("extra") or {}, export, out),
    )
    input_ids = base_store.read_input_ids()
    merged = {k: v for k, v in workers.items() if k != drop}
    names = [n for n in {**merged, **{p.name: None for p in add}} if n != REFERENCE64]
    local = executor is None or isinstance(executor, LocalExecutor)
    # locally, the run's inputs are analysed as the added participants finish them, in the
    # slots they leave free (the clean participants ran already), from a fork server
    # started beside them
    early = for_run(out, names, input_ids, parallel, isolation=True) if local else None
    try:
        results = resume_workers(
            out,
            add,
            job,
            input_ids,
            say or (lambda _m: None),
            threads,
            parallel,
            store.participant(REFERENCE64).folder,
            executor=executor,
            when_idle=partial(warm_fork_server, out, names, REFERENCE64, input_ids, parallel)
            if local
            else None,
            on_tail=early.tick if early is not None else None,
        )
        merged.update({name: result.to_dict() for name, result in results.items()})
        store.write_participants(merged)
        summary = analyse_run(out, executor, parallel, early)
    finally:
        if early is not None:
            early.close()
        fork_server.stop()  # kept from the workers' tail for the analysis
    store.write_summary(summary.to_dict())
    return summary


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
) -> dict[str, Any] | None:
    """Run one faulty participant against the clean run ``base``; return its row
    (``parallel``: processes of its analysis, beside the faulty worker and after it;
    ``None``, said and given to ``skipped``, when the fault matches no node of its stage).
    """
    base_store = RunStore.open(base)
    export = AnchoredExport.from_dict(base_store.read_export())
    faulty = faulty_participant(parse_participant(library), spec)
    if not RunStore(fault_dir).has_summary():
        try:
            plan_fault(spec, export)
        except AnpredError as err:
            say(f"  skip {faulty.name}: {err}")
            if skipped is not None:
                skipped(str(err))
            return None
    options = base_store.read_settings()
    options["extra"] = {EXTRA_KEY: {library: spec.to_dict()}}
    summary = derive_run(
        base,
        fault_dir,
        model,
        [faulty],
        parse_participant(library).name,
        options,
        threads,
        parallel,
        reanalyse=reanalyse,
        executor=executor,
    )
    return fault_row(summary, clean, model, library, faulty.name, spec)


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
    return onnx.load(str(export.anchored_path)), stage_anchors(export)


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
) -> list[dict[str, Any]]:
    """Every fault run of one model (``(library, fault)`` pairs); their rows, in order.

    Locally they run one by one; with a distributed ``executor``, up to ``parallel`` at once.
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
            executor,
            parallel if local else 1,  # distributed: the fault runs share the slots
            reasons.append,
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
        rows = [one(*item) for item in todo]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max(1, parallel), thread_name_prefix="anpred-fault") as pool:
            rows = list(pool.map(lambda item: one(*item), todo))
    return [row for row in rows if row is not None]


def calibrate_clean_run(
    grid: EvalGrid,
    model: str,
    folders: EvalStore,
    base: Path,
    say: Say,
    threads: int,
    parallel: int,
    executor: Executor | None,
) -> Summary:
    """Learn the oracle's per-anchor thresholds on calibration inputs; judge the clean run
    ``base`` with them (the fault runs derived from it inherit them) and return its summary.

    The calibration run is a clean run of the grid's participants and its fp32
    configurations on ``grid.calibration`` seeded synthetic images, which the evaluation's
    runs (bundled photographs) never use.
    """
    say(f"== {model}: calibration run ({grid.calibration} synthetic inputs)")
    cal_dir = folders.calibration_run(model)
    options = RunOptions(
        model=model,
        libs=(grid.libs, *fp32_configurations(grid.configurations)),
        images=0,
        synthetic=grid.calibration,
        granularity=grid.granularity,
    )
    try:
        run(options, cal_dir, say=say, threads=threads, parallel=parallel, executor=executor)
        calibration = calibrate_run(cal_dir)
        attach(calibration, base)
        say(f"  calibration cached: {cache_calibration_run(options, cal_dir, calibration)}")
    except AnpredError as err:  # e.g. two participants only: no population to learn from
        say(f"  no calibration for {model} ({err}); the fixed noise factor judges it")
        return Summary.from_dict(RunStore.open(base).read_summary())
    clean = analyse_run(base, executor)
    RunStore.open(base).write_summary(clean.to_dict())
    return clean


def evaluate(
    grid: EvalGrid,
    out: Path,
    say: Say,
    threads: int = 1,
    parallel: int = 2,
    reanalyse: bool = False,
    executor: Executor | None = None,
    keep_captures: str = KEEP_NEEDED,
    results: Path | None = None,
) -> list[ModelResult]:
    """Run the whole grid (resumable: finished runs are reused, and judged again from
    their captures with ``reanalyse``; the clean runs are judged again when anything of
    the model runs).

    ``results`` (default ``out``): the compact results folder
    (:mod:`anpred.evaluation.results`), updated as each run ends; a fault whose row or skip
    is recorded there is not run again, even when ``out`` is gone (with ``reanalyse``, a
    fault whose run directory is still in ``out`` is judged again).

    ``keep_captures``: ``needed`` prunes each model's fault, configuration, calibration and
    sweep runs once the model is done (:mod:`anpred.pipeline.prune`); the clean run keeps
    its captures in both modes (fault runs link them, and a resumed grid adds faults).

    With a distributed ``executor`` (Ray), up to ``parallel`` fault runs are in flight at
    once (each one worker job, then its analysis, both Ray tasks the cluster schedules);
    locally they run one by one.
    """
    done = []
    folders = EvalStore(out)
    kept = ResultsFolder(results if results is not None else out)
    for model in grid.models:
        stale = kept.start_model(
            model,
            model_settings(
                model,
                grid.libs,
                grid.images,
                grid.granularity,
                grid.calibration,
                fp32_configurations(grid.configurations),
            ),
            say,
        )
        result = _read_back(grid, model, folders, kept, reanalyse, say)
        if result is None:
            result = _run_model(
                grid, model, folders, kept, say, threads, parallel, reanalyse or stale,
                executor, keep_captures,
            )  # fmt: skip
        done.append(result)
        kept.write_tables(grid.models)
    return done


def _sweeps(grid: EvalGrid, model: str) -> bool:
    """Whether the grid sweeps ``model``'s input size (a resizable zoo model; an ONNX file's
    size is fixed, and so is ViT's).
    """
    from anpred.zoo.registry import get_model, model_names

    if not grid.sizes or model not in model_names():
        return False
    spec = get_model(model)
    return spec.resizable and spec.module_source is None


def _stages(grid: EvalGrid, clean: Summary) -> list[str]:
    return clean.anchor_keys[:-1] if grid.stages == "all" else list(grid.stages)


def _read_back(
    grid: EvalGrid,
    model: str,
    folders: EvalStore,
    kept: ResultsFolder,
    reanalyse: bool,
    say: Say,
) -> ModelResult | None:
    """The model's results from the results folder alone, when everything the grid asks of
    it is recorded there (``None``: something must run).
    """
    prior = kept.model_result(model)
    if prior is None or reanalyse:
        return None
    if any(axis.nodes for axis in grid.faults):
        if not RunStore(folders.clean_run(model)).has_summary():
            return None  # the drawn nodes are those of the clean run's graph
        faults = fault_list(grid, model, folders.clean_run(model), _stages(grid, prior.clean))
    else:
        faults = fault_list(grid, model, Path(), _stages(grid, prior.clean))
    keys = [fault_key(lib, spec) for lib, spec in faults if lib != REFERENCE32]
    if not all(kept.done(model, k) for k in keys):
        return None
    if (grid.configurations and prior.configurations is None) or (
        _sweeps(grid, model)
        and (prior.sweep is None or list(grid.sizes) != prior.sweep.get("sizes"))
    ):
        return None
    rows = kept.order(model, keys)
    say(f"== {model}: everything read back from {kept.root} ({len(rows)} fault runs, "
        f"{kept.skip_count(model)} faults not applicable, the clean run"
        + (", the configuration study" if grid.configurations else "")
        + (", the size sweep" if _sweeps(grid, model) else "") + "): nothing to run")  # fmt: skip
    return ModelResult(model, prior.clean, [r for k in keys if (r := kept.row(model, k))],
                       prior.configurations, prior.sweep)  # fmt: skip


def _run_model(
    grid: EvalGrid,
    model: str,
    folders: EvalStore,
    kept: ResultsFolder,
    say: Say,
    threads: int,
    parallel: int,
    reanalyse: bool,
    executor: Executor | None,
    keep_captures: str,
) -> ModelResult:
    """Run what the results folder lacks of one model, recording each run as it ends."""
    say(f"== {model}: clean run")
    base = folders.clean_run(model)
    clean = run(
        RunOptions(
            model=model, libs=(grid.libs,), images=grid.images, granularity=grid.granularity
        ),
        base,
        say=say,
        threads=threads,
        parallel=parallel,
        executor=executor,
        keep_captures=KEEP_ALL,
    ).summary
    if grid.calibration:
        clean = calibrate_clean_run(grid, model, folders, base, say, threads, parallel, executor)
    kept.write_summary(model, "clean", clean)
    result = ModelResult(model, clean)
    faults = [(lib, spec) for lib, spec in fault_list(grid, model, base, _stages(grid, clean))
              if lib != REFERENCE32]  # fmt: skip
    keys = [fault_key(lib, spec) for lib, spec in faults]

    def recorded(lib: str, spec: FaultSpec) -> bool:
        return kept.done(model, fault_key(lib, spec)) and not (
            reanalyse and RunStore(folders.fault_run(model, fault_name(lib, spec))).has_summary()
        )

    todo = [(lib, spec) for lib, spec in faults if not recorded(lib, spec)]
    if len(todo) < len(faults):
        say(f"== {model}: {len(faults) - len(todo)} of {len(faults)} fault runs already in "
            f"{kept.root} ({len(faults) - len(todo) - kept.skip_count(model)} rows, "
            f"{kept.skip_count(model)} not applicable): not run again; "
            f"{len(todo)} to run")  # fmt: skip
    run_faults(
        base, folders, model, faults, clean, say, threads, parallel, reanalyse, executor, kept,
        recorded,
    )  # fmt: skip
    result.rows = [r for k in keys if (r := kept.row(model, k))]
    kept.order(model, keys)
    prior = kept.model_result(model)
    if grid.configurations:
        if prior is not None and prior.configurations is not None and not reanalyse:
            say(f"== {model}: configuration study read back from {kept.root}")
            result.configurations = prior.configurations
        else:
            say(f"== {model}: configurations {','.join(grid.configurations)}")
            result.configurations = run_configurations(
                base,
                folders.configurations_run(model),
                model,
                grid.configurations,
                threads,
                parallel,
                reanalyse,
                say,
                executor,
            )
            kept.write_summary(model, "configurations", result.configurations)
    if grid.sizes and not _sweeps(grid, model):
        say(f"== {model}: no size sweep (its input size is fixed)")
    elif grid.sizes:
        if prior is not None and prior.sweep and prior.sweep.get("sizes") == list(grid.sizes):
            say(f"== {model}: size sweep read back from {kept.root}")
            result.sweep = prior.sweep
        else:
            from anpred.pipeline.sweep import sweep

            say(f"== {model}: input sizes {','.join(map(str, grid.sizes))}")
            result.sweep = sweep(
                RunOptions(
                    model=model, libs=(grid.libs,), images=grid.images, granularity=grid.granularity
                ),
                grid.sizes,
                folders.sweep_dir(model),
                say,
                threads=threads,
                parallel=parallel,
                executor=executor,
                keep_captures=keep_captures,
            )
            kept.write_sweep(model, result.sweep)
    if keep_captures == KEEP_NEEDED:
        prune_runs([*folders.derived_runs(model), folders.calibration_run(model)], say)
    return result
