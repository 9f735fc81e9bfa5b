"""``anpred calibrate``: a calibration run of a model, its calibration learnt and cached.

The run is an ordinary ``anpred run`` (:func:`anpred.pipeline.run.run`) on held-out seeded
synthetic inputs (:func:`anpred.calibration.cache.calibration_options`); what it learns and
where it is stored is :mod:`anpred.calibration`'s.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from anpred.calibration.cache import cache_calibration_run, calibration_options
from anpred.calibration.rule import Calibration
from anpred.calibration.stored import calibrate_run
from anpred.pipeline.run import run
from anpred.settings import ExecutionSettings, RunOptions


def calibrate_model(
    options: RunOptions, n_inputs: int, run_dir: Path, settings: ExecutionSettings
) -> tuple[Calibration, Path]:
    """Run the calibration run of ``options``'s model in ``run_dir``, learn its calibration
    and store it in the cache under the key a run with ``options`` looks up.

    ``settings`` say how the calibration run executes (it drills nothing and is judged by
    the fixed rule, whatever they say).

    Returns:
        The calibration and its cache file.

    Raises:
        UsageError: Too few inputs, or fewer than three
            participants finished (no population to learn from).
    """
    plain = replace(settings, drill=False, calibration="off")
    run(calibration_options(options, n_inputs), run_dir, plain)
    calibration = calibrate_run(run_dir)
    return calibration, cache_calibration_run(options, run_dir, calibration)
