"""The settings of one ``anpred run`` (moved to :mod:`anpred.settings`; kept as a name)."""

from __future__ import annotations

from anpred.settings import RunOptions

__all__ = ["RunOptions"]
