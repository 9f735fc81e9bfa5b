"""Calibrate the oracle's noise thresholds on a clean run and hand them to the runs it judges.

A *calibration run* is a clean run (every participant a legitimate fp32 implementation) on
*calibration inputs* that the judged runs do not use: ``anpred eval`` runs one per model
on seeded synthetic images (:data:`CALIBRATION_SYNTHETIC`), while the judged runs use the
bundled photographs. :func:`calibrate_run` turns its deviations table into a
:class:`~anpred.analysis.calibration.Calibration`; :func:`attach` stores it in a run
directory, where :func:`with_stored_calibration` finds it when the run is analysed. A run
directory without one is judged with the fixed factor, as before (the summary says which
rule applied: ``oracle.threshold_rule``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from anpred.analysis.calibration import Calibration, calibrate_rows
from anpred.analysis.metrics import resolutions
from anpred.analysis.oracle import OracleParams
from anpred.errors import UsageError
from anpred.participants import REFERENCE32
from anpred.store import RunStore

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

    A calibration of another primary metric does not apply (the fixed rule judges).
    """
    if params.calibration is not None:
        return params
    record = store.read_calibration()
    if record is None:
        return params
    calibration = Calibration.from_dict(record)
    if calibration.metric != params.primary_metric:
        return params
    return replace(params, calibration=calibration)
