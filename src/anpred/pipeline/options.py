"""The settings of one ``anpred run`` (moved to :mod:`anpred.settings`).

Kept only for ``evaluation/campaign.py``, which imports ``RunOptions`` from here; it goes
when that import does (issue 40).
"""

from __future__ import annotations

from anpred.settings import RunOptions

__all__ = ["RunOptions"]
