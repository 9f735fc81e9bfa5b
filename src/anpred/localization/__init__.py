"""Localization and characterization of library-induced precision errors (pure NumPy).

Every function takes plain data (anchor names, ``{(participant, input_id): ...}``
mappings, NumPy arrays) and returns a result dataclass with a ``to_dict()`` giving
JSON-ready data for the run summary.
"""

from __future__ import annotations

from anpred.localization.concentration import (
    DEFAULT_TOP_K,
    Concentration,
    StageShare,
    gini,
    stage_concentration,
)
from anpred.localization.dimension import (
    DEFAULT_BORDER_WIDTH,
    DEFAULT_TOP_CHANNEL_FRACTION,
    DimensionProfile,
    border_interior_ratio,
    border_mask,
    channel_error,
    dimension_profile,
    elementwise_error,
    spatial_error_map,
    top_channel_share,
)
from anpred.localization.emergence import (
    BlameRecord,
    Emergence,
    EmergenceDistribution,
    FindingKey,
    LibraryBlame,
    collect_findings,
    emergence_anchor,
    emergence_distribution,
    emergences,
    library_blame,
)
from anpred.localization.masking import (
    MaskingCase,
    MaskingSummary,
    masking_case,
    summarize_masking,
)
from anpred.localization.propagation import (
    DEFAULT_DEVIATION_FLOOR,
    DEFAULT_LOG_GAIN_TOLERANCE,
    PropagationProfile,
    Step,
    count_direction_changes,
    propagation_profile,
)
from anpred.localization.stage_error import (
    StageError,
    StageIsolation,
    relative_l2,
    stage_isolation,
)
from anpred.localization.sweep import (
    DEFAULT_ERROR_FLOOR,
    DEFAULT_SWEEP_LOG_TOLERANCE,
    SizeSweep,
    size_sweep,
    sweep_by_anchor,
)

__all__ = [
    "DEFAULT_BORDER_WIDTH",
    "DEFAULT_DEVIATION_FLOOR",
    "DEFAULT_ERROR_FLOOR",
    "DEFAULT_LOG_GAIN_TOLERANCE",
    "DEFAULT_SWEEP_LOG_TOLERANCE",
    "DEFAULT_TOP_CHANNEL_FRACTION",
    "DEFAULT_TOP_K",
    "BlameRecord",
    "Concentration",
    "DimensionProfile",
    "Emergence",
    "EmergenceDistribution",
    "FindingKey",
    "LibraryBlame",
    "MaskingCase",
    "MaskingSummary",
    "PropagationProfile",
    "SizeSweep",
    "StageError",
    "StageIsolation",
    "StageShare",
    "Step",
    "border_interior_ratio",
    "border_mask",
    "channel_error",
    "collect_findings",
    "count_direction_changes",
    "dimension_profile",
    "elementwise_error",
    "emergence_anchor",
    "emergence_distribution",
    "emergences",
    "gini",
    "library_blame",
    "masking_case",
    "propagation_profile",
    "relative_l2",
    "spatial_error_map",
    "stage_concentration",
    "stage_isolation",
    "size_sweep",
    "summarize_masking",
    "sweep_by_anchor",
    "top_channel_share",
]
