"""anpred: anchor-based precision error detection and localization for DL libraries.

Importing this package imports no DL library: every library is imported inside its
backend, in its own worker process.
"""

from __future__ import annotations

from anpred.errors import AnpredError, MissingTranslatorError, UsageError

__version__ = "0.1.0"

__all__ = ["AnpredError", "MissingTranslatorError", "UsageError", "__version__"]
