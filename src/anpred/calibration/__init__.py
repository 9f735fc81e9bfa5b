"""Calibrated noise thresholds: learnt from a clean run, cached per model, given to runs.

- :mod:`~anpred.calibration.rule`: the statistical rule (per-anchor tolerance bounds of
  the noise ratios of legitimate implementations) and the :class:`Calibration` record the
  oracle reads (``OracleParams.calibration``);
- :mod:`~anpred.calibration.stored`: a run directory's calibration: learnt from a clean
  run (:func:`calibrate_run`), stored with the runs it judges (:func:`attach`), read back
  by the analysis (:func:`with_stored_calibration`), re-keyed for the drill-down;
- :mod:`~anpred.calibration.cache`: calibrations cached per model under the key of what
  the noise ratios depend on (model, shape, anchors, the fp32 participants their library
  descriptors declare), and ``--calibration auto|off|FILE``.

Running a calibration run is a run of the pipeline: :mod:`anpred.pipeline.calibration_run`.
"""

from anpred.calibration.rule import Calibration

__all__ = ["Calibration"]
