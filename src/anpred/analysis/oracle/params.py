"""The oracle's parameters: every constant with its measurement or citation, and
:class:`OracleParams`, which a run, a calibration and the drill-down hand it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from anpred.analysis.metrics import get_metric, metric_names
from anpred.errors import UsageError
from anpred.library.precision import FP32

if TYPE_CHECKING:
    # the calibration (anpred.calibration, a layer above) is given to the oracle, which
    # only calls it
    from anpred.calibration.rule import Calibration


OUTLIER_K = 3.5
"""Outlier cut-off in robust standard deviations (1.4826 · MAD).

3.5 is Iglewicz & Hoaglin's cut-off for the modified z-score 0.6745 (x − median) / MAD
("How to Detect and Handle Outliers", ASQC 1993), the usual choice for small samples; the
population here is participants × inputs, often a few dozen deviations."""

FIXED_RULE = "fixed"
"""Name of the fixed noise rule: :data:`NOISE_FACTOR` times the noise floor at every anchor
(the rule without a calibration; :data:`anpred.calibration.rule.RULE` is the other)."""

NOISE_FACTOR = 10.0
"""How many times the fp64-calibrated noise floor a finding must exceed.

Measured (tests/analysis/test_oracle.py, test_noise_factor_covers_fp32_reorderings): one
fp32 reduction computed with BLAS, blocked (16, 256) and permuted summation orders
deviates from the consensus by at most 1.2x the floor for 64 to 8192 terms; naive
sequential summation reaches 1.8x (1024 terms) and 4.5x (8192 terms). 10 keeps every
legitimate fp32 reordering out with a margin of 2 while precision faults worth reporting
(bf16 rounding ~4e-3, fp16 or tf32 ~5e-4 relative) are 10^2-10^4 times the floor of an
fp32 stage (~1e-7 to 1e-5)."""

MAD_FLOOR_REL = 0.1
"""The outlier scale is at least this fraction of the population median.

Deterministic participants can produce near-identical deviations on every input; their MAD
then underestimates the spread and a deviation a hair above the median would be an
outlier. With this floor a deviation must exceed the median by 35 % (3.5 · 0.1)."""

MAD_TO_SIGMA = 1.4826
"""1 / Φ⁻¹(3/4): makes the MAD a consistent estimator of a normal standard deviation."""

PRIMARY_METRIC = "rel_l2"
"""The metric that decides verdicts (see the module docstring for why)."""

CLASS_FACTOR = 3.0
"""How many times its class's ideal floor a reduced-precision deviation must exceed.

The ideal reference computes every operator exactly and rounds its result once, the least
error arithmetic of that format can have per operator; a correct implementation rounds
at other points (fused operators, bf16 kept only for conv/matmul operands, folded batch
norms) and lands near it. Measured (``docs/oracle.md``, "Precision classes"): torch's
autocast bf16 against the ideal bf16 reference, at every stage anchor of resnet50,
yolov8n, convnext_tiny and vit_b_16, 0.5-1.6 times the ideal's error. 3 keeps
legitimate implementations out with a margin of about 2, while a stage computed with a
coarser format or accumulator (fp16 where bf16 is declared, bf16 accumulation over
hundreds of terms) is several times worse."""

METRICS_CANDIDATES = "candidates"
"""``OracleParams.metrics_scope``: the primary metric everywhere, the others where the oracle
has a candidate (see the module docstring). The default: the exact Wasserstein sorts were
half of the kernel's time and decide nothing (``docs/benchmarks.md``, "The analysis")."""

METRICS_ALL = "all"
"""``OracleParams.metrics_scope``: every metric at every (anchor, input)."""

METRICS_SCOPES = (METRICS_CANDIDATES, METRICS_ALL)

INTRODUCED_METRIC = "rel_l2"
"""What introduced errors are: stage isolation computes them with
:func:`~anpred.analysis.metrics.relative_l2`, whatever the primary metric, so they are
judged with that metric's resolution (``OracleParams.resolution`` overrides it too)."""


@dataclass(frozen=True)
class OracleParams:
    """Every parameter of the oracle, with documented defaults.

    Attributes:
        outlier_k: :data:`OUTLIER_K`.
        noise_factor: :data:`NOISE_FACTOR`.
        mad_floor_rel: :data:`MAD_FLOOR_REL`.
        primary_metric: :data:`PRIMARY_METRIC`.
        metrics: Metrics to compute; ``None`` for all registered metrics. The primary
            metric is always computed.
        resolution: Per-metric overrides of the metrics' declared resolutions (the value
            below which a deviation means nothing; see :mod:`anpred.analysis.metrics`).
        calibration: Per-anchor noise factors of the primary metric and of introduced
            errors (:mod:`anpred.calibration.rule`); an anchor it has no factor for,
            and every anchor when it is ``None``, uses ``noise_factor``.
        class_factor: :data:`CLASS_FACTOR` (reduced-precision classes without a
            calibrated factor).
        metrics_scope: Where the metrics other than the primary are computed:
            :data:`METRICS_CANDIDATES` (where the oracle has a candidate) or
            :data:`METRICS_ALL` (everywhere).

    Raises:
        UsageError: An unknown ``metrics_scope``.
    """

    outlier_k: float = OUTLIER_K
    noise_factor: float = NOISE_FACTOR
    mad_floor_rel: float = MAD_FLOOR_REL
    primary_metric: str = PRIMARY_METRIC
    metrics: tuple[str, ...] | None = None
    resolution: Mapping[str, float] = field(default_factory=dict)
    calibration: Calibration | None = None
    class_factor: float = CLASS_FACTOR
    metrics_scope: str = METRICS_CANDIDATES

    def __post_init__(self) -> None:
        if self.metrics_scope not in METRICS_SCOPES:
            raise UsageError(
                f"metrics scope must be one of {', '.join(METRICS_SCOPES)}, "
                f"not {self.metrics_scope!r}"
            )

    @property
    def threshold_rule(self) -> str:
        """Which noise rule judges the primary metric: calibrated or the fixed factor."""
        return self.calibration.rule if self.calibration is not None else FIXED_RULE

    def factor(self, anchor: str) -> float:
        """The primary metric's noise factor at ``anchor`` (calibrated or fixed)."""
        found = self.calibration.factor(anchor) if self.calibration is not None else None
        return self.noise_factor if found is None else found

    def introduced_factor(self, anchor: str) -> float:
        """The noise factor of introduced errors at ``anchor`` (calibrated or fixed)."""
        cal = self.calibration
        found = cal.introduced_factor(anchor) if cal is not None else None
        return self.noise_factor if found is None else found

    def factor_of(self, precision: str, anchor: str, introduced: bool = False) -> float:
        """The noise factor of ``precision``'s class at ``anchor`` (of its introduced errors
        when ``introduced``): the fp32 factors above, or a reduced class's (calibrated, else
        ``class_factor``).
        """
        if precision == FP32:
            return self.introduced_factor(anchor) if introduced else self.factor(anchor)
        cal = self.calibration
        found = cal.class_factor(precision, anchor, introduced) if cal is not None else None
        return self.class_factor if found is None else found

    def metric_names(self) -> tuple[str, ...]:
        """Return the metrics to compute, primary first."""
        chosen = metric_names() if self.metrics is None else self.metrics
        names = (self.primary_metric, *(n for n in chosen if n != self.primary_metric))
        for name in names:
            get_metric(name)  # raises KeyError for an unknown metric
        return names
