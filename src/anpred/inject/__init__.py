"""Fault injection: the ground truth of the evaluation.

A :class:`FaultSpec` names a stage (anchor key), an ONNX op type, a fault kind and a
severity. It travels in a participant's settings (``settings["fault"]``); runners resolve
it against the export (:func:`plan_fault`) and apply it with the library's own operators:
translated libraries through the interpreter's per-node hooks (:class:`FaultHooks`),
onnxruntime and OpenVINO by rewriting the ONNX graphs (:func:`rewrite_model`).

Importing this package imports no DL library.
"""

from anpred.inject.ground_truth import ground_truth
from anpred.inject.hooks import FaultHooks
from anpred.inject.math import FaultMath, library_math
from anpred.inject.onnx_rewrite import OnnxFaultMath, rewrite_model
from anpred.inject.participants import apply_faults, faulty_name, faulty_participant
from anpred.inject.plan import PlannedFault, plan_fault
from anpred.inject.spec import (
    ANY_OP,
    SETTINGS_KEY,
    FaultKind,
    FaultSpec,
    Target,
    fault_kind,
    fault_kinds,
    register_fault,
)
from anpred.inject.stages import node_stages, resolve_targets, stage_ops

__all__ = [
    "ANY_OP",
    "SETTINGS_KEY",
    "FaultHooks",
    "FaultKind",
    "FaultMath",
    "FaultSpec",
    "OnnxFaultMath",
    "PlannedFault",
    "Target",
    "apply_faults",
    "fault_kind",
    "fault_kinds",
    "faulty_name",
    "faulty_participant",
    "ground_truth",
    "library_math",
    "node_stages",
    "plan_fault",
    "register_fault",
    "resolve_targets",
    "rewrite_model",
    "stage_ops",
]
