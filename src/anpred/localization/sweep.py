"""Error as a function of input size (resolution or batch sweeps).

For one anchor, the deviation measured at several input sizes is summarised by the
least-squares slope of ln(error) against ln(size) (an error growing like ``size**p``
has slope ``p``) and by whether it changes monotonically with size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from anpred.errors import UsageError
from anpred.localization._plain import plain_float, plain_floats
from anpred.localization.propagation import count_direction_changes

DEFAULT_ERROR_FLOOR = 2.0**-24
"""Errors are clamped to this floor before taking logs (float32 unit roundoff; see
:data:`anpred.localization.propagation.DEFAULT_DEVIATION_FLOOR`)."""

DEFAULT_SWEEP_LOG_TOLERANCE = 0.0
"""Changes with |Δ ln error| at most this count as flat; 0 means exact comparisons."""


@dataclass(frozen=True)
class SizeSweep:
    """One anchor's error across input sizes.

    Attributes:
        sizes: The sizes, ascending.
        errors: The error at each size, as given.
        slope: Least-squares slope of ln(max(error, floor)) against ln(size).
        intercept: Intercept of that fit.
        trend: ``"increasing"``, ``"decreasing"``, ``"constant"`` or ``"non-monotonic"``.
        n_direction_changes: Sign changes between consecutive non-flat changes.
    """

    sizes: tuple[float, ...]
    errors: tuple[float, ...]
    slope: float
    intercept: float
    trend: str
    n_direction_changes: int

    @property
    def monotonic(self) -> bool:
        """Whether the error never changes direction as the size grows."""
        return self.trend != "non-monotonic"

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready plain data."""
        return {
            "sizes": list(self.sizes),
            "errors": plain_floats(self.errors),
            "slope": plain_float(self.slope),
            "intercept": plain_float(self.intercept),
            "trend": self.trend,
            "monotonic": self.monotonic,
            "n_direction_changes": self.n_direction_changes,
        }


def size_sweep(
    sizes: Sequence[float],
    errors: Sequence[float] | np.ndarray,
    *,
    error_floor: float = DEFAULT_ERROR_FLOOR,
    log_tolerance: float = DEFAULT_SWEEP_LOG_TOLERANCE,
) -> SizeSweep:
    """Summarise how one anchor's error changes with the input size.

    Args:
        sizes: Input sizes (e.g. image side or batch size), positive and distinct, any order.
        errors: The error at each size (finite, non-negative).
        error_floor: Errors below it are raised to it before taking logs (must be > 0).
        log_tolerance: |Δ ln error| at most this is a flat change.

    Returns:
        The fit and the monotonicity verdict, with sizes sorted ascending.

    Raises:
        UsageError: On fewer than two points, mismatched lengths, repeated or
            non-positive sizes, negative or non-finite errors, or bad parameters.
    """
    size_values = np.asarray(sizes, dtype=np.float64)
    error_values = np.asarray(errors, dtype=np.float64)
    if size_values.ndim != 1 or size_values.shape != error_values.shape:
        raise UsageError(f"need one error per size: {size_values.shape} vs {error_values.shape}")
    if size_values.size < 2:
        raise UsageError("a sweep needs at least two sizes")
    if np.any(size_values <= 0) or np.unique(size_values).size != size_values.size:
        raise UsageError(f"sizes must be positive and distinct, got {size_values.tolist()}")
    if not np.all(np.isfinite(error_values)) or np.any(error_values < 0):
        raise UsageError(f"errors must be finite and non-negative, got {error_values.tolist()}")
    if not error_floor > 0 or not log_tolerance >= 0:
        raise UsageError("error_floor must be positive and log_tolerance non-negative")

    order = np.argsort(size_values)
    size_values, error_values = size_values[order], error_values[order]
    log_errors = np.log(np.maximum(error_values, error_floor))
    slope, intercept = np.polyfit(np.log(size_values), log_errors, 1)
    steps = np.diff(log_errors)
    directions = [0 if abs(d) <= log_tolerance else (1 if d > 0 else -1) for d in steps]
    changes = count_direction_changes(directions)
    if changes:
        trend = "non-monotonic"
    elif any(d > 0 for d in directions):
        trend = "increasing"
    elif any(d < 0 for d in directions):
        trend = "decreasing"
    else:
        trend = "constant"
    return SizeSweep(
        sizes=tuple(float(s) for s in size_values),
        errors=tuple(float(e) for e in error_values),
        slope=float(slope),
        intercept=float(intercept),
        trend=trend,
        n_direction_changes=changes,
    )


def sweep_by_anchor(
    sizes: Sequence[float],
    errors: Mapping[str, Sequence[float] | np.ndarray],
    *,
    error_floor: float = DEFAULT_ERROR_FLOOR,
    log_tolerance: float = DEFAULT_SWEEP_LOG_TOLERANCE,
) -> dict[str, SizeSweep]:
    """Apply :func:`size_sweep` to every anchor's errors over the same sizes.

    Args:
        sizes: The input sizes.
        errors: ``{anchor: error at each size}``.
        error_floor: See :func:`size_sweep`.
        log_tolerance: See :func:`size_sweep`.

    Returns:
        ``{anchor: SizeSweep}`` in the mapping's order.
    """
    return {
        anchor: size_sweep(sizes, values, error_floor=error_floor, log_tolerance=log_tolerance)
        for anchor, values in errors.items()
    }
