"""The run store: the only code that knows the files of a run directory and their formats.

:class:`RunStore` is one run directory, :class:`ParticipantStore` one job's folder in it;
:class:`EvalStore` and :class:`SweepStore` the folders that hold several runs.
:class:`Status` and :class:`Step` are the outcome enums every stage uses;
:class:`Summary` is what a run's analysis found (``summary.json``, versioned).
"""

from anpred.store.files import PLAIN_KEY, CaptureFile
from anpred.store.layout import FORMAT, LEGACY_FORMAT, RunStore
from anpred.store.outcome import FAILED_STATES, FINISHED_STATES, Status, Step
from anpred.store.participant import CAPTURE, ISOLATED, ParticipantStore, safe_name
from anpred.store.studies import EVAL_OUTPUTS, EvalStore, SweepStore
from anpred.store.summary import SCHEMA_VERSION, Finding, Summary

__all__ = [
    "CAPTURE",
    "EVAL_OUTPUTS",
    "FAILED_STATES",
    "FINISHED_STATES",
    "FORMAT",
    "ISOLATED",
    "LEGACY_FORMAT",
    "PLAIN_KEY",
    "SCHEMA_VERSION",
    "CaptureFile",
    "EvalStore",
    "Finding",
    "ParticipantStore",
    "RunStore",
    "Status",
    "Step",
    "Summary",
    "SweepStore",
    "safe_name",
]
