"""The last steps of a run: drill into its findings, write its summary and report, prune
its captures, and say how it ended (the exit code).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from anpred.analysis.oracle import OracleParams
from anpred.calibration.stored import with_stored_calibration
from anpred.errors import UsageError
from anpred.execution.pool import WorkerResult
from anpred.pipeline.drill import run_drill
from anpred.pipeline.plan import RunPlan
from anpred.pipeline.prune import prune_run
from anpred.report.html import write_report
from anpred.settings import KEEP_NEEDED
from anpred.store.files import PrunedCaptureError
from anpred.store.summary import Summary
from anpred.store.summary_drill import DrillDown


@dataclass
class RunOutcome:
    """What ``anpred run`` hands to the CLI."""

    run_dir: Path
    summary: Summary
    exit_code: int


def drill_findings(plan: RunPlan, summary: Summary) -> Summary:
    """The summary with its drill-down from flagged stages to operators, when the run has
    findings and drills (:mod:`anpred.pipeline.drill`: one more small job per participant).
    """
    if not (plan.settings.drill and summary.findings):
        return summary
    params = with_stored_calibration(plan.store, OracleParams(metrics=()))
    try:
        found = run_drill(plan.out, plan.participants, summary, plan.settings, params)
    except PrunedCaptureError as err:  # new findings on a pruned run: no stage inputs
        found = DrillDown((), reason=str(err))
    return replace(summary, drill=found)


def write_results(plan: RunPlan, summary: Summary, started: float) -> Summary:
    """Write the summary (with the run's wall time) and the HTML report; return it."""
    summary = replace(summary, wall_seconds=round(time.perf_counter() - started, 2))
    plan.store.write_summary(summary.to_dict())
    write_report(plan.out, summary, processes=plan.settings.workers)
    return summary


def finish_run(plan: RunPlan, summary: Summary, results: dict[str, WorkerResult]) -> RunOutcome:
    """Prune what nothing reads later (``--keep-captures needed``) and say how the run
    ended: 0 no findings, 1 findings, 3 a participant failed (crash/timeout/error).

    Raises:
        UsageError: Every failure was the user's input (e.g. an op without a translator),
            not a library's.
    """
    if plan.settings.keep_captures == KEEP_NEEDED:
        prune_run(plan.out, summary, plan.settings.say)
    failed = [r for r in results.values() if r.failed]
    if failed and all(r.usage_error for r in failed):
        # e.g. an op without a translator: the user's input, not a library failure
        raise UsageError(
            f"{failed[0].participant}: {failed[0].message.split(': ', 1)[-1]} "
            f"(results of the others are in {plan.out})"
        )
    findings = bool(summary.findings)
    return RunOutcome(plan.out, summary, 3 if failed else 1 if findings else 0)
