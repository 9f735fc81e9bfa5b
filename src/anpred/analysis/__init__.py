"""Analysis core: alignment, deviation metrics, the consensus oracle and the baselines.

Pure NumPy/SciPy; importing this package imports no DL library.
"""

from __future__ import annotations

from anpred.analysis.alignment import Aligned, AlignmentError, align
from anpred.analysis.baselines import (
    BaselineVerdict,
    cradle_dmad,
    dynamo_same,
    max_abs_threshold,
    polygraphy_allclose,
)
from anpred.analysis.channels import ChannelPermutation, infer_channel_permutation
from anpred.analysis.consensus import elementwise_median
from anpred.analysis.methods import (
    Judgement,
    get_method,
    judge_with_all,
    method_names,
    register_method,
)
from anpred.analysis.metrics import (
    Metric,
    compute_metrics,
    get_metric,
    metric_names,
    register_metric,
)
from anpred.analysis.oracle import (
    NOISE_FACTOR,
    OUTLIER_K,
    AnchorEvidence,
    Deviation,
    OracleParams,
    assess,
    consensus_oracle,
    judge_anchor,
)
from anpred.analysis.verdict import Criterion, MetricJudgement, Verdict

__all__ = [
    "NOISE_FACTOR",
    "OUTLIER_K",
    "Aligned",
    "AlignmentError",
    "AnchorEvidence",
    "BaselineVerdict",
    "ChannelPermutation",
    "Criterion",
    "Deviation",
    "Judgement",
    "Metric",
    "MetricJudgement",
    "OracleParams",
    "Verdict",
    "align",
    "assess",
    "compute_metrics",
    "consensus_oracle",
    "cradle_dmad",
    "dynamo_same",
    "elementwise_median",
    "get_method",
    "get_metric",
    "infer_channel_permutation",
    "judge_anchor",
    "judge_with_all",
    "max_abs_threshold",
    "method_names",
    "metric_names",
    "polygraphy_allclose",
    "register_method",
    "register_metric",
]
