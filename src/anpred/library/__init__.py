"""Library descriptors: one registration per library or runtime, read by everything else.

See ``docs/adding-a-library.md``. Importing this package imports no DL library.
"""

from __future__ import annotations

from anpred.library.descriptor import (
    ENTRY_POINT_GROUP,
    PLUGINS_ENV,
    Library,
    Loads,
    get_library,
    libraries,
    register_library,
)
from anpred.library.precision import Precision

__all__ = [
    "ENTRY_POINT_GROUP",
    "PLUGINS_ENV",
    "Library",
    "Loads",
    "Precision",
    "get_library",
    "libraries",
    "register_library",
]
