"""Conversion of result values into JSON-ready plain data (shared by the result dataclasses)."""

from __future__ import annotations

import math
from collections.abc import Iterable


def plain_float(value: float | None) -> float | None:
    """Return ``value`` as a Python float, or ``None`` when it is missing or not finite.

    Strict JSON has no NaN or infinity, so results write non-finite numbers as ``null``.
    """
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def plain_floats(values: Iterable[float]) -> list[float | None]:
    """Apply :func:`plain_float` to every value of an iterable."""
    return [plain_float(v) for v in values]
