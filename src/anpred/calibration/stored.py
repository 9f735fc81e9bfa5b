"""A run directory's calibration: learnt from a clean run, stored with the runs it judges.

A *calibration run* is a clean run (every participant a legitimate fp32 implementation) on
*calibration inputs* that the judged runs do not use: ``anpred eval`` runs one per model
on seeded synthetic images (:data:`CALIBRATION_SYNTHETIC`), while the judged runs use the
bundled photographs. :func:`calibrate_run` turns its deviations table into a
:class:`~anpred.calibration.rule.Calibration`; :func:`attach` stores it in a run
directory, where :func:`with_stored_calibration` finds it when the run is analysed. A run
directory without one is judged with the fixed factor, as before (the summary says which
rule applied: ``oracle.threshold_rule``). ``anpred run`` gives its run directory the
calibration ``--calibration`` selects (:func:`apply_calibration`; a cached one by default,
:mod:`anpred.calibration.cache`), and its drill-down judges operators with it
(:func:`operator_params`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from anpred.analysis.metrics import resolutions
from anpred.analysis.oracle import METRICS_ALL, OracleParams
from anpred.calibration.cache import calibration_key, resolve
from anpred.calibration.rule import Calibration, calibrate_rows
from anpred.errors import UsageError
from anpred.participants import REFERENCE32, Participant
from anpred.store import RunStore

if TYPE_CHECKING:
    from anpred.interchange.export import AnchoredExport
    from anpred.settings import RunOptions

CALIBRATION_SYNTHETIC = 4
"""Seeded synthetic images a calibration run uses: with six participants, 24 noise ratios
per anchor, disjoint from the bundled photographs the evaluation judges."""


def calibrate_run(run_dir: Path, params: OracleParams | None = None) -> Calibration:
    """The calibration learnt from a finished clean run's deviations table.

    Raises:
        UsageError: The run has no deviations table, or only two participants.
    """
    params = params or OracleParams()
    store = RunStore.open(Path(run_dir))
    rows = store.read_deviations()
    if not rows:
        raise UsageError(f"{run_dir}: no deviations to calibrate on (analyse the run first)")
    settings = store.read_settings()
    return calibrate_rows(
        rows,
        REFERENCE32,
        metric=params.primary_metric,
        resolution=resolutions(params.resolution)[params.primary_metric],
        model=f"{settings.get('model')} (seed {settings.get('seed')}, "
        f"weights {settings.get('weights')})",
    )


def attach(calibration: Calibration, run_dir: Path) -> None:
    """Store ``calibration`` in a run directory; its next analysis uses it.

    Raises:
        UsageError: When the run judges an input the calibration was learnt on.
    """
    store = RunStore.open(Path(run_dir))
    shared = set(calibration.inputs) & set(store.read_input_ids())
    if shared:
        raise UsageError(
            f"{run_dir}: the calibration was learnt on inputs {sorted(shared)} this run "
            "judges; calibrate on other inputs"
        )
    store.write_calibration(calibration.to_dict())


def with_stored_calibration(store: RunStore, params: OracleParams) -> OracleParams:
    """``params`` with the run directory's calibration, if it has one and none is given.

    A calibration of another primary metric does not apply (the fixed rule judges). A run
    recorded with ``--metrics all`` computes every metric everywhere (``metrics_scope``).
    """
    if store.read_settings().get("extra", {}).get("metrics") == METRICS_ALL:
        params = replace(params, metrics_scope=METRICS_ALL)
    if params.calibration is not None:
        return params
    record = store.read_calibration()
    if record is None:
        return params
    calibration = Calibration.from_dict(record)
    if calibration.metric != params.primary_metric:
        return params
    return replace(params, calibration=calibration)


def apply_calibration(
    mode: str,
    options: RunOptions,
    export: AnchoredExport,
    participants: Sequence[Participant],
    run_dir: Path,
    judged: Sequence[str],
) -> str:
    """Give the run directory the calibration ``--calibration MODE`` selects
    (:func:`anpred.calibration.cache.resolve`), or none (the fixed rule); return the line
    that says which rule judges the run and why.

    Raises:
        UsageError: A calibration file that does not fit the run.
    """
    key = calibration_key(options, export, participants, OracleParams().primary_metric)
    found = resolve(mode, key, judged)
    store = RunStore(Path(run_dir))
    if found.calibration is None:
        store.remove_calibration()
    else:
        store.write_calibration(found.calibration.to_dict())
    return found.message


def operator_params(params: OracleParams, stage_of: Mapping[str, str]) -> OracleParams:
    """The drill-down's oracle parameters: ``params`` with its calibration re-keyed from
    stages to the operators inside them (``stage_of``: operator key → stage anchor).

    An operator's **deviation** in the drill-down is measured with the stage fed the fp64
    reference's input, the same regime as stage isolation, so it takes the calibrated
    factor of its stage's *introduced* errors. An operator's own **introduced** error
    (that operator alone, isolated) has no calibrated counterpart: a calibration measures
    whole stages, and one operator's rounding spreads differently from a stage's; the fixed
    factor judges it.
    """
    cal = params.calibration
    if cal is None:
        return params
    anchors = {op: cal.introduced[s] for op, s in stage_of.items() if s in cal.introduced}
    return replace(params, calibration=replace(cal, anchors=anchors, introduced={}))
