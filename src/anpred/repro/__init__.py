"""From a drilled finding to a verified minimal reproducer, and the setting that causes it.

``anpred repro RUN_DIR`` (:func:`make_reproducers`) writes one folder per drilled finding
(docs/reproducers.md); :func:`load_reproducers` reads a run's. Importing this package
imports no DL library.
"""

from anpred.repro.make import ReproOptions, make_reproducers
from anpred.repro.symptom import SYMPTOM_FACTOR, Symptom, SymptomCheck, check
from anpred.store.repro_record import ReproRecord, Status, load_reproducers

__all__ = [
    "SYMPTOM_FACTOR",
    "ReproOptions",
    "ReproRecord",
    "Status",
    "Symptom",
    "SymptomCheck",
    "check",
    "load_reproducers",
    "make_reproducers",
]
