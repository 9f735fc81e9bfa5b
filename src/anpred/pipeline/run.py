"""``anpred run``: a chain of steps, each in its own module.

1. plan (:mod:`anpred.pipeline.plan`): check the model and the run directory, export the
   anchored model (:mod:`anpred.pipeline.model_export`), size the run, prepare the inputs
   (:mod:`anpred.pipeline.run_inputs`), select the calibration;
2. execute (:mod:`anpred.pipeline.execute`): the fp64 reference and every participant's
   worker, in one go or chunk by chunk;
3. analyse (:mod:`anpred.pipeline.analyse`): align, consensus, oracle, localization,
   baselines;
4. drill, write the summary and the report, prune, exit code (:mod:`anpred.pipeline.finish`).

Every step writes to the run directory as it finishes, so an interrupted run resumes:
``anpred run`` on a directory holding a run with the same settings skips finished work.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from anpred import fork_server
from anpred.pipeline.analyse import analyse
from anpred.pipeline.execute import execute_run
from anpred.pipeline.finish import RunOutcome, drill_findings, finish_run, write_results
from anpred.pipeline.plan import plan_run
from anpred.settings import ExecutionSettings, RunOptions
from anpred.zoo.registry import module_source

__all__ = ["RunOutcome", "run"]


def run(options: RunOptions, out: Path, settings: ExecutionSettings | None = None) -> RunOutcome:
    """Run the whole pipeline and return the summary and the exit code.

    Args:
        options: What the run computes.
        out: The run directory (a run with the same options there is resumed).
        settings: How it executes (default: ``anpred run``'s defaults).

    Returns:
        The run directory, its summary and the exit code: 0 no findings, 1 findings,
        3 a participant failed (crash/timeout/error).

    Raises:
        UsageError: Bad settings or input (one line).
        JobFailedError: The model export crashed, failed or took over ``export_timeout`` s.
    """
    settings = ExecutionSettings() if settings is None else settings
    started = time.perf_counter()
    # a zoo transformer runs from its module source (the CLI maps it too: cli/flags.py)
    options = replace(options, model=module_source(options.model))
    plan = plan_run(options, out, settings)
    early = None
    try:
        results, early = execute_run(plan)
        plan.settings.say("analyse: align, consensus, oracle, localization, baselines")
        summary = analyse(out, say=plan.settings.say, processes=plan.settings.workers, early=early)
        summary = drill_findings(plan, summary)
        summary = write_results(plan, summary, started)
    finally:
        if early is not None:
            early.close()  # interrupted, or the analysis did not take it over
        fork_server.stop()  # the run kept it for its analysis and report
    return finish_run(plan, summary, results)
