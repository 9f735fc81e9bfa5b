"""Propagation profile: how one participant's deviation evolves along the anchor order.

The deviation is any non-negative magnitude per anchor for one participant and one input,
typically the relative L2 distance to the fp64 reference or to the consensus.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from anpred.errors import UsageError
from anpred.localization._plain import plain_float, plain_floats

DEFAULT_DEVIATION_FLOOR = 2.0**-24
"""Deviations are clamped to this floor before gains are taken (float32 unit roundoff).

A relative deviation below one float32 unit roundoff cannot be told apart from rounding
the tensor to float32 once, and bit-identical captures give exactly zero; clamping keeps
the gain finite (0 → 0 is a gain of 1, 0 → x is x / floor)."""

DEFAULT_LOG_GAIN_TOLERANCE = math.log(1.5)
"""Steps whose |ln gain| is at most this are flat (no direction).

Adding one stage's worth of independent rounding error to an inherited error of the
same size grows a relative L2 deviation by √2 ≈ 1.41 at most; a gain within
[1/1.5, 1.5] is therefore ordinary accumulation, not amplification or attenuation."""


@dataclass(frozen=True)
class Step:
    """One stage of the profile: from the anchor before it to the anchor after it.

    Attributes:
        source: The anchor feeding the stage.
        target: The anchor the stage produces.
        position: Index of ``target`` in the anchor order.
        gain: ``max(dev[target], floor) / max(dev[source], floor)``.
    """

    source: str
    target: str
    position: int
    gain: float

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready plain data."""
        return {
            "source": self.source,
            "target": self.target,
            "position": self.position,
            "gain": plain_float(self.gain),
        }


@dataclass(frozen=True)
class PropagationProfile:
    """Deviation of one participant along the anchor order, with its gains.

    Attributes:
        anchors: The anchors in topological order.
        deviations: The deviation at each anchor, as given.
        gains: One gain per consecutive pair of anchors (``len(anchors) - 1`` values).
        directions: Per step, ``+1`` (amplified), ``-1`` (attenuated) or ``0`` (flat,
            |ln gain| within the tolerance).
        n_direction_changes: Sign changes between consecutive non-flat steps.
        max_amplification: The step with the largest gain above 1, ``None`` if none.
        max_attenuation: The step with the smallest gain below 1, ``None`` if none.
        deviation_floor: The floor applied before taking gains.
        log_gain_tolerance: The flat band on |ln gain|.
    """

    anchors: tuple[str, ...]
    deviations: tuple[float, ...]
    gains: tuple[float, ...]
    directions: tuple[int, ...]
    n_direction_changes: int
    max_amplification: Step | None
    max_attenuation: Step | None
    deviation_floor: float
    log_gain_tolerance: float

    @property
    def steps(self) -> tuple[Step, ...]:
        """Every step of the profile, in order."""
        return tuple(
            Step(self.anchors[i], self.anchors[i + 1], i + 1, g) for i, g in enumerate(self.gains)
        )

    @property
    def monotonic(self) -> bool:
        """Whether the non-flat steps all go the same way."""
        return self.n_direction_changes == 0

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready plain data."""
        return {
            "anchors": list(self.anchors),
            "deviations": plain_floats(self.deviations),
            "gains": plain_floats(self.gains),
            "directions": list(self.directions),
            "n_direction_changes": self.n_direction_changes,
            "max_amplification": (
                None if self.max_amplification is None else self.max_amplification.to_dict()
            ),
            "max_attenuation": (
                None if self.max_attenuation is None else self.max_attenuation.to_dict()
            ),
            "deviation_floor": self.deviation_floor,
            "log_gain_tolerance": self.log_gain_tolerance,
        }


def count_direction_changes(directions: Sequence[int]) -> int:
    """Count sign changes between consecutive non-zero entries of ``directions``."""
    signs = [d for d in directions if d != 0]
    return sum(a != b for a, b in zip(signs, signs[1:], strict=False))


def propagation_profile(
    anchors: Sequence[str],
    deviations: Sequence[float] | np.ndarray,
    *,
    deviation_floor: float = DEFAULT_DEVIATION_FLOOR,
    log_gain_tolerance: float = DEFAULT_LOG_GAIN_TOLERANCE,
) -> PropagationProfile:
    """Build the propagation profile of one participant for one input.

    Args:
        anchors: The anchors in topological order.
        deviations: The participant's deviation at each anchor (finite, non-negative).
        deviation_floor: Values below it are raised to it before dividing (must be > 0).
        log_gain_tolerance: Steps with |ln gain| at most this are flat (must be >= 0).

    Returns:
        The profile with gains, directions, direction changes and the extreme steps.

    Raises:
        UsageError: On mismatched lengths, negative or non-finite deviations, or bad
            parameters.
    """
    values = np.asarray(deviations, dtype=np.float64)
    if values.ndim != 1 or values.shape[0] != len(anchors):
        raise UsageError(
            f"need one deviation per anchor: {len(anchors)} anchors, shape {values.shape}"
        )
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise UsageError(f"deviations must be finite and non-negative, got {values.tolist()}")
    if not deviation_floor > 0:
        raise UsageError(f"deviation_floor must be positive, got {deviation_floor}")
    if not log_gain_tolerance >= 0:
        raise UsageError(f"log_gain_tolerance must be non-negative, got {log_gain_tolerance}")

    floored = np.maximum(values, deviation_floor)
    gains = floored[1:] / floored[:-1]
    log_gains = np.log(gains)
    directions = tuple(
        0 if abs(lg) <= log_gain_tolerance else (1 if lg > 0 else -1) for lg in log_gains
    )
    steps = [Step(anchors[i], anchors[i + 1], i + 1, float(g)) for i, g in enumerate(gains)]
    amplifying = [s for s in steps if s.gain > 1.0]
    attenuating = [s for s in steps if s.gain < 1.0]
    return PropagationProfile(
        anchors=tuple(anchors),
        deviations=tuple(float(v) for v in values),
        gains=tuple(float(g) for g in gains),
        directions=directions,
        n_direction_changes=count_direction_changes(directions),
        max_amplification=max(amplifying, key=lambda s: s.gain, default=None),
        max_attenuation=min(attenuating, key=lambda s: s.gain, default=None),
        deviation_floor=float(deviation_floor),
        log_gain_tolerance=float(log_gain_tolerance),
    )
