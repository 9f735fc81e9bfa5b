"""Memory budget of a run (moved to :mod:`anpred.execution.resources`; kept as a name)."""

from __future__ import annotations

from anpred.execution.resources import (
    DEFAULT_SHARE,
    MemoryEstimate,
    available_memory,
    check_budget,
    check_disk,
    default_budget,
    estimate_disk,
    estimate_memory,
    format_size,
    parse_size,
)

__all__ = [
    "available_memory",
    "check_budget",
    "check_disk",
    "default_budget",
    "DEFAULT_SHARE",
    "estimate_disk",
    "estimate_memory",
    "format_size",
    "MemoryEstimate",
    "parse_size",
]
