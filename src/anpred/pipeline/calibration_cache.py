"""The calibration cache (moved to :mod:`anpred.calibration.cache`).

Kept only for ``evaluation/campaign.py``, which imports ``cache_calibration_run`` from
here; it goes when that import does (issue 40).
"""

from __future__ import annotations

from anpred.calibration.cache import cache_calibration_run

__all__ = ["cache_calibration_run"]
