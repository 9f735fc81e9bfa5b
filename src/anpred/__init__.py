"""anpred: anchor-based precision error detection and localization for DL libraries.

Importing this package imports no DL library: every library is imported inside its
backend, in its own worker process. The Python API -- ``anpred.run(...)``,
``anpred.load(run_dir)`` returning a :class:`~anpred.api.Run` -- is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anpred.errors import AnpredError, MissingTranslatorError, UsageError

if TYPE_CHECKING:
    from anpred.api import Run, load, run

__version__ = "0.1.0"

__all__ = [
    "AnpredError",
    "MissingTranslatorError",
    "Run",
    "UsageError",
    "__version__",
    "load",
    "run",
]

#: The Python API (:mod:`anpred.api`), imported on first use so that ``import anpred`` stays
#: light (no DL library, no pyarrow, no pandas).
_API = ("Run", "load", "run")


def __getattr__(name: str) -> Any:
    if name in _API:
        from anpred import api

        return getattr(api, name)
    raise AttributeError(f"module 'anpred' has no attribute {name!r}")
