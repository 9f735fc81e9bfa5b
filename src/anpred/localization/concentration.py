"""Stage concentration: how much of the introduced error a few stages carry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from anpred.errors import UsageError
from anpred.localization._plain import plain_float

DEFAULT_TOP_K = (1, 3)
"""The top-k shares reported by default: the top-1 and the top-3 stages."""


def gini(values: Sequence[float] | np.ndarray) -> float:
    """Gini coefficient of non-negative values.

    With the values sorted ascending, ``x_(1) <= ... <= x_(n)``::

        G = 2 * sum_i(i * x_(i)) / (n * sum_i x_(i)) - (n + 1) / n
          = sum_i sum_j |x_i - x_j| / (2 * n**2 * mean(x))

    ``G = 0`` when all values are equal; ``G = (n - 1) / n`` (→ 1 as n grows) when one
    value carries everything. An all-zero vector, or a single value, gives 0.

    Args:
        values: Finite, non-negative values.

    Raises:
        UsageError: On negative or non-finite values.
    """
    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    if not np.all(np.isfinite(x)) or np.any(x < 0):
        raise UsageError(f"gini needs finite non-negative values, got {x.tolist()}")
    n = x.size
    total = x.sum()
    if n == 0 or total == 0:
        return 0.0
    ranks = np.arange(1, n + 1, dtype=np.float64)
    return float(2.0 * np.dot(ranks, x) / (n * total) - (n + 1) / n)


@dataclass(frozen=True)
class StageShare:
    """One stage's introduced error and its share of the total.

    Attributes:
        stage: The stage.
        introduced: Its introduced error.
        share: ``introduced / total`` (0 when the total is 0).
    """

    stage: str
    introduced: float
    share: float

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready plain data."""
        return {"stage": self.stage, "introduced": self.introduced, "share": self.share}


@dataclass(frozen=True)
class Concentration:
    """Concentration of introduced error over stages.

    Attributes:
        ranking: Stages by decreasing introduced error (ties keep the stage order).
        total: Sum of introduced errors.
        top_shares: ``{k: share of the total carried by the k largest stages}``.
        gini: Gini coefficient over stages (see :func:`gini`).
    """

    ranking: tuple[StageShare, ...]
    total: float
    top_shares: dict[int, float]
    gini: float

    @property
    def top_stage(self) -> str | None:
        """The stage introducing the most error (``None`` when there are no stages)."""
        return self.ranking[0].stage if self.ranking else None

    def top_share(self, k: int) -> float:
        """Share of the total carried by the ``k`` largest stages."""
        if k < 1:
            raise UsageError(f"k must be at least 1, got {k}")
        return float(sum(s.share for s in self.ranking[:k]))

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-ready plain data (top-share keys as strings, as JSON requires)."""
        return {
            "ranking": [s.to_dict() for s in self.ranking],
            "total": plain_float(self.total),
            "top_shares": {str(k): v for k, v in self.top_shares.items()},
            "gini": self.gini,
        }


def stage_concentration(
    introduced: Mapping[str, float], *, top_k: Sequence[int] = DEFAULT_TOP_K
) -> Concentration:
    """Rank stages by introduced error and measure how concentrated it is.

    Args:
        introduced: ``{stage: introduced error}`` (finite, non-negative), e.g.
            :meth:`anpred.localization.stage_error.StageIsolation.introduced`.
        top_k: The k for which the top-k share is reported.

    Returns:
        The ranking, top-k shares and Gini coefficient. When every stage introduces zero
        error, all shares and the Gini coefficient are 0.

    Raises:
        UsageError: On negative or non-finite errors, or a k below 1.
    """
    stages = list(introduced)
    values = np.asarray([introduced[s] for s in stages], dtype=np.float64)
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise UsageError(f"introduced errors must be finite and non-negative, got {introduced}")
    if any(k < 1 for k in top_k):
        raise UsageError(f"top_k values must be at least 1, got {list(top_k)}")
    total = float(values.sum())
    order = sorted(range(len(stages)), key=lambda i: -values[i])
    ranking = tuple(
        StageShare(stages[i], float(values[i]), float(values[i] / total) if total else 0.0)
        for i in order
    )
    top_shares = {int(k): float(sum(s.share for s in ranking[: int(k)])) for k in top_k}
    return Concentration(ranking=ranking, total=total, top_shares=top_shares, gini=gini(values))
