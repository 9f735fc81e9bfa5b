"""Fault injection: the ground truth of the evaluation.

A :class:`FaultSpec` names a stage (anchor key), an ONNX op type, a fault kind and a
severity. The main process resolves it against the export (:func:`plan_fault`) and hands
it to the faulty participant's worker as a transform (:func:`fault_transform`), applied
with the library's own operators around a runner that knows nothing about faults:
translated libraries through the interpreter's per-node hooks (:class:`FaultHooks`),
onnxruntime and OpenVINO (and attribute faults everywhere) by graphs rewritten before the
worker starts (:func:`rewrite_model`).

Importing this package imports no DL library.
"""

from anpred.inject.ground_truth import injection_record
from anpred.inject.hooks import FaultHooks
from anpred.inject.math import FaultMath, library_math
from anpred.inject.onnx_rewrite import OnnxFaultMath, rewrite_model
from anpred.inject.participants import apply_faults, faulty_name, faulty_participant
from anpred.inject.plan import PlannedFault, plan_fault
from anpred.inject.spec import (
    ANY_OP,
    FaultKind,
    FaultSpec,
    Partial,
    Target,
    fault_kind,
    fault_kinds,
    parse_partial,
    register_fault,
)
from anpred.inject.stages import node_stages, resolve_targets, stage_ops
from anpred.inject.transforms import fault_transform

__all__ = [
    "ANY_OP",
    "FaultHooks",
    "FaultKind",
    "FaultMath",
    "FaultSpec",
    "OnnxFaultMath",
    "Partial",
    "PlannedFault",
    "Target",
    "apply_faults",
    "fault_kind",
    "fault_kinds",
    "fault_transform",
    "faulty_name",
    "faulty_participant",
    "injection_record",
    "library_math",
    "node_stages",
    "parse_partial",
    "plan_fault",
    "register_fault",
    "resolve_targets",
    "rewrite_model",
    "stage_ops",
]
