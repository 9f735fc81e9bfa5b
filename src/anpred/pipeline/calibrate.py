"""A run directory's calibration (moved to :mod:`anpred.calibration.stored`).

Kept only for ``evaluation/campaign.py``, which imports ``attach`` and ``calibrate_run``
from here; it goes when that import does (issue 40).
"""

from __future__ import annotations

from anpred.calibration.stored import attach, calibrate_run

__all__ = ["attach", "calibrate_run"]
