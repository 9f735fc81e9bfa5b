"""The execute step of a run: the fp64 reference and every participant's worker.

:func:`execute_run` runs the plan's workers in one go, or a chunk of inputs at a time
(:mod:`anpred.pipeline.chunks`), and records every participant's result in the run
directory; :func:`execute` runs one set of workers on some inputs, skipping the finished
ones (resume). Where the workers write to this file system, the analysis gets ready
beside the last workers (its fork server, :mod:`anpred.pipeline.early_pass`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from anpred.analysis.oracle import OracleParams
from anpred.backends.base import ModelJob
from anpred.calibration.stored import with_stored_calibration
from anpred.execution.job import OBSERVER_KEY
from anpred.execution.pool import WorkerResult
from anpred.execution.schedule import heavier_first, resume_workers, shares_files, worker_groups
from anpred.execution.worker import OBSERVER_INPUTS
from anpred.interchange.export import AnchoredExport
from anpred.interchange.transform import TRANSFORMS_KEY
from anpred.interchange.user_module import is_module_source, is_onnx_path
from anpred.machine import describe_machine
from anpred.participants import REFERENCE64, Participant, parse_participant
from anpred.pipeline.chunks import chunked, run_in_chunks
from anpred.pipeline.collect_pool import warm_fork_server
from anpred.pipeline.early_pass import EarlyPass, for_run
from anpred.pipeline.plan import RunPlan
from anpred.pipeline.transforms import plan_transforms
from anpred.report.plots import PRELOAD as PLOTTING
from anpred.settings import ExecutionSettings, RunOptions
from anpred.store import RunStore


def model_job(
    export: AnchoredExport,
    model: str,
    weights: str | None,
    seed: int,
    inputs: Path,
    transforms: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The job fields every worker of a run shares: what to run, on which inputs, and the
    transforms planned for some participants (see :mod:`anpred.pipeline.transforms`).
    """
    module = model if is_module_source(model) else None
    zoo = None if is_onnx_path(model) or module else model
    job: dict[str, Any] = {
        "model": ModelJob(export, zoo, weights, seed, module).to_dict(),
        "inputs": str(inputs),
    }
    if transforms:
        job[TRANSFORMS_KEY] = {
            name: [dict(r) for r in records] for name, records in transforms.items()
        }
    return job


def early_pass(
    options: RunOptions,
    run_dir: Path,
    participants: Sequence[Participant],
    input_ids: Sequence[str],
    settings: ExecutionSettings,
) -> EarlyPass | None:
    """What collects finished inputs in the slots the last workers leave free, set to
    collect them as :func:`~anpred.pipeline.analyse.analyse` will (its participants, anchors
    and oracle parameters); ``None`` where the workers do not write to this file system.
    """
    if not shares_files(settings):
        return None
    names = [p.name for p in participants]
    return for_run(run_dir, names, input_ids, settings.workers, options.isolation)


def execute(
    options: RunOptions,
    run_dir: Path,
    participants: list[Participant],
    export: AnchoredExport,
    input_ids: list[str],
    settings: ExecutionSettings,
    observer_inputs: Sequence[str] | None = None,
    early: EarlyPass | None = None,
) -> dict[str, WorkerResult]:
    """Run the fp64 reference and every participant; skip finished ones (resume).

    ``settings``: resolved (:class:`~anpred.pipeline.plan.RunPlan`). ``observer_inputs``:
    the inputs whose plain output the workers also compute (the observer check); default
    the first :data:`~anpred.execution.worker.OBSERVER_INPUTS` of ``input_ids`` (a chunk of
    a run passes the run's first ones). ``early``: collects finished inputs in the slots
    the last workers leave free (:mod:`anpred.pipeline.early_pass`). The fp64 reference
    runs in line with the others or before them: :func:`~anpred.execution.schedule.worker_groups`.
    """
    store = RunStore(run_dir)
    store.write_machine(describe_machine())
    transforms = plan_transforms(options.extra, export, run_dir)
    job = model_job(
        export, options.model, options.weights, options.seed, store.inputs_path, transforms
    )
    if observer_inputs is not None:
        job[OBSERVER_KEY] = list(observer_inputs)
    results: dict[str, WorkerResult] = {}
    reference = parse_participant(REFERENCE64)
    source = store.participant(REFERENCE64).folder if options.isolation else None
    groups = worker_groups(reference, heavier_first(participants), source, settings)
    # once the last worker has started, the analysis's fork server gets ready beside it
    names = [p.name for p in participants]
    warm = partial(
        warm_fork_server, run_dir, names, REFERENCE64, input_ids, settings.workers, also=PLOTTING
    )
    for n, (group, isolation_source, concurrent) in enumerate(groups):
        last = n == len(groups) - 1
        results.update(
            resume_workers(
                run_dir,
                group,
                job,
                input_ids,
                settings,
                isolation_source=isolation_source,
                reference=concurrent,
                when_idle=warm if last else None,
                on_tail=early.tick if early is not None and last else None,
            )
        )
    order = [REFERENCE64, *(p.name for p in participants)]
    return {name: results[name] for name in order if name in results}


def execute_run(plan: RunPlan) -> tuple[dict[str, WorkerResult], EarlyPass | None]:
    """Run the plan's workers, in one go or chunk by chunk, and record their results;
    return them and the early pass the analysis takes over (``None``: none, or chunks).
    """
    options, out, settings = plan.options, plan.out, plan.settings
    input_ids, participants = plan.input_ids, plan.participants

    def execute_some(
        ids: list[str], group: list[Participant], early: EarlyPass | None = None
    ) -> dict[str, WorkerResult]:
        observed = input_ids[:OBSERVER_INPUTS]
        return execute(options, out, group, plan.export, ids, settings, observed, early)

    early = None
    try:
        if chunked(settings.chunk, len(input_ids), settings.keep_captures):
            store = RunStore(out)
            params = with_stored_calibration(store, OracleParams())
            anchors = [a.key for a in plan.export.anchors]
            early_for = partial(early_pass, options, out, participants, settings=settings)
            results = run_in_chunks(
                store, execute_some, participants, input_ids, anchors, settings.chunk, params,
                settings.say, settings.workers, early_for,
            )  # fmt: skip
            order = [REFERENCE64, *(p.name for p in participants)]
            results = {n: results[n] for n in order if n in results}
        else:
            early = early_pass(options, out, participants, input_ids, settings)
            results = execute_some(input_ids, participants, early)
        RunStore(out).write_participants({k: v.to_dict() for k, v in results.items()})
    except BaseException:
        if early is not None:
            early.close()  # interrupted: nobody takes it over
        raise
    return results, early
