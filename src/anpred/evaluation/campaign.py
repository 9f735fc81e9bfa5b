"""Run an evaluation grid: one clean run per model, then one faulty participant per fault.

Clean participants are deterministic, so a fault's run reuses the clean run's captures
(linked, not copied) and executes only the faulty participant instead of a whole
``anpred run`` (:mod:`anpred.evaluation.fault_runs`). Each model also gets a calibration
run, a study of real configurations and a sweep of input sizes, as the grid asks; every
run is recorded in the results folder as it ends (:mod:`anpred.evaluation.results`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from anpred.calibration.cache import cache_calibration_run
from anpred.calibration.stored import attach, calibrate_run
from anpred.errors import AnpredError
from anpred.evaluation.fault_runs import (
    SERVED,
    analyse_run,
    derive_run,
    fault_list,
    fault_name,
    run_configurations,
    run_fault,
    run_faults,
)
from anpred.evaluation.grid import EvalGrid, fp32_configurations
from anpred.evaluation.results import ModelResult, ResultsFolder, fault_key, model_settings
from anpred.execution.executor import Executor
from anpred.inject.spec import FaultSpec
from anpred.participants import REFERENCE32
from anpred.pipeline.drill import load_drill
from anpred.pipeline.prune import KEEP_ALL, KEEP_NEEDED, prune_runs
from anpred.pipeline.run import run
from anpred.progress import Say
from anpred.settings import ExecutionSettings, RunOptions
from anpred.store import EvalStore, RunStore
from anpred.store.summary import Summary

__all__ = [
    "ModelResult",
    "analyse_run",
    "derive_run",
    "evaluate",
    "fault_list",
    "fault_name",
    "run_configurations",
    "run_fault",
    "run_faults",
]


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
    store = RunStore.open(base)
    judged_with = store.read_calibration()  # what the clean run's ``run`` just judged it with
    try:
        run(
            options,
            cal_dir,
            ExecutionSettings(say=say, threads=threads, parallel=parallel, executor=executor),
        )
        calibration = calibrate_run(cal_dir)
        attach(calibration, base)
        say(f"  calibration cached: {cache_calibration_run(options, cal_dir, calibration)}")
    except AnpredError as err:  # e.g. two participants only: no population to learn from
        say(f"  no calibration for {model} ({err}); the fixed noise factor judges it")
        return Summary.from_dict(store.read_summary())
    if _same_record(judged_with, store.read_calibration()):
        # a resumed campaign: the clean run was judged with this very calibration moments
        # ago (its ``run``), and an analysis is a function of the captures and calibration
        # alone; its summary, with the drill-down as recorded and no wall time (what ``run``
        # adds), is what judging it again gives (~0.8 CPU s on yolov8n's, issue 41)
        clean = replace(
            Summary.from_dict(store.read_summary()), drill=load_drill(base), wall_seconds=None
        )
    else:
        clean = analyse_run(base, executor)
    store.write_summary(clean.to_dict())
    return clean


def _same_record(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two calibration records (as read back from JSON) are the same, NaN included."""
    return (
        a is not None
        and b is not None
        and json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    )


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
    fault_workers: str = SERVED,
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
    locally they run one by one, their faulty workers served by one process per library
    (``fault_workers``; ``fresh``: one worker process per fault run,
    :mod:`anpred.evaluation.fault_runs`).
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
                executor, keep_captures, fault_workers,
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
    fault_workers: str = SERVED,
) -> ModelResult:
    """Run what the results folder lacks of one model, recording each run as it ends."""
    say(f"== {model}: clean run")
    base = folders.clean_run(model)
    clean = run(
        RunOptions(
            model=model, libs=(grid.libs,), images=grid.images, granularity=grid.granularity
        ),
        base,
        ExecutionSettings(
            say=say, threads=threads, parallel=parallel, executor=executor, keep_captures=KEEP_ALL
        ),
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
        recorded, fault_workers,
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
                ExecutionSettings(
                    say=say,
                    threads=threads,
                    parallel=parallel,
                    executor=executor,
                    keep_captures=keep_captures,
                ),
            )
            kept.write_sweep(model, result.sweep)
    if keep_captures == KEEP_NEEDED:
        prune_runs([*folders.derived_runs(model), folders.calibration_run(model)], say)
    return result
