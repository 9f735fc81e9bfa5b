"""Transforms (moved to :mod:`anpred.interchange.transform`; the names are kept here for
the code that imports them from this module).
"""

from __future__ import annotations

from anpred.interchange.transform import (
    TRANSFORMS_KEY,
    Infer,
    NodeHooks,
    Transform,
    Transforms,
    check_records,
    register_transform,
    transform_from_record,
)

__all__ = [
    "TRANSFORMS_KEY",
    "Infer",
    "NodeHooks",
    "Transform",
    "Transforms",
    "check_records",
    "register_transform",
    "transform_from_record",
]
