"""The two tests of one value: a robust outlier of its population, above its noise
threshold (:func:`_judge_metric`); both phases use them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from anpred.analysis.metrics import resolutions
from anpred.analysis.oracle.params import MAD_TO_SIGMA, OracleParams
from anpred.analysis.verdict import MetricJudgement


@dataclass(frozen=True)
class _Population:
    median: float
    mad: float


def _population(values: Iterable[float]) -> _Population:
    """Median and MAD of the non-NaN values (inf values count; NaN ones do not)."""
    v = np.array([x for x in values if not math.isnan(x)], dtype=np.float64)
    if v.size == 0:
        return _Population(math.nan, math.nan)
    median = float(np.median(v))
    with np.errstate(invalid="ignore"):  # inf − inf where the median itself is inf
        spread = np.where(v == median, 0.0, np.abs(v - median))
    return _Population(median, float(np.median(spread)))


_NOBODY = _Population(math.nan, math.nan)
"""The population of a test that needs none (the noise test alone)."""


def _judge_metric(
    name: str,
    value: float,
    population: _Population,
    noise_floor: float,
    resolution: float,
    params: OracleParams,
    factor: float | None = None,
) -> MetricJudgement:
    """Judge one value; ``factor`` (default ``params.noise_factor``) times the floor is the
    noise threshold.
    """
    scale = max(MAD_TO_SIGMA * population.mad, params.mad_floor_rel * population.median, resolution)
    outlier_threshold = population.median + params.outlier_k * scale
    # an unusable (NaN) floor falls back to the metric's resolution
    floor = resolution if math.isnan(noise_floor) else max(noise_floor, resolution)
    noise_threshold = (params.noise_factor if factor is None else factor) * floor
    return MetricJudgement(
        metric=name,
        value=value,
        population_median=population.median,
        mad=population.mad,
        scale=scale,
        outlier_threshold=outlier_threshold,
        noise_floor=noise_floor,
        noise_threshold=noise_threshold,
        outlier=bool(value > outlier_threshold),
        above_noise=bool(value > noise_threshold),
    )


def _above_noise(
    params: OracleParams, name: str, value: float, floor: float, factor: float
) -> bool:
    """Whether ``value`` of metric ``name`` exceeds ``factor`` times ``floor`` (the noise test
    of :func:`_judge_metric`, which needs no population).
    """
    resolution = resolutions(params.resolution).get(name, 0.0)
    return _judge_metric(name, value, _NOBODY, floor, resolution, params, factor).above_noise
