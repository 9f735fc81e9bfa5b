"""Faulty participants: a participant whose worker applies a fault, with its own name.

A faulty participant is named ``<participant>!<kind>@<stage>`` (``paddle!bf16@neck.p4``,
``tensorflow[xla]!mantissa@backbone.p3``): the ``!`` marks it as faulty in every table and
plot. Its settings are the clean participant's: the fault (op and severity included)
reaches its worker as a transform (:mod:`anpred.inject.transforms`), recorded in its
status record. It replaces the clean participant of the same name in the run (the
population then holds exactly one version of that library).

``anpred inject`` passes the faults as ``RunOptions.extra["faults"]`` =
``{participant spec: fault dict}``; :func:`apply_faults` turns the run's participant list
into the faulty one, and :func:`~anpred.inject.transforms.fault_transforms` plans the
faults once the export exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from anpred.errors import UsageError
from anpred.inject.spec import FaultSpec
from anpred.participants import FAULT_MARK, REFERENCE64, Participant, parse_participant

#: Key of the faults in ``RunOptions.extra``.
EXTRA_KEY = "faults"


def faulty_name(participant: str, spec: FaultSpec) -> str:
    """Name of ``participant`` carrying ``spec``: ``paddle!bf16@neck.p4``."""
    return f"{participant}{FAULT_MARK}{spec.label}"


def is_faulty(name: str) -> bool:
    """Whether a participant name is that of a faulty participant."""
    return FAULT_MARK in name


def faulty_participant(participant: Participant, spec: FaultSpec) -> Participant:
    """Return ``participant`` under its faulty name (settings unchanged: the fault is a
    transform of its job, not a setting of its library).
    """
    return Participant(
        faulty_name(participant.name, spec),
        participant.library,
        participant.config,
        dict(participant.settings),
        participant.version,
    )


def parse_faults(faults: Mapping[str, Mapping[str, Any]]) -> dict[str, FaultSpec]:
    """Parse ``{participant spec: fault dict}``; keys become canonical participant names.

    Raises:
        UsageError: Unknown participant or invalid fault.
    """
    parsed = {}
    for spec, fault in faults.items():
        parsed[parse_participant(spec).name] = FaultSpec.from_dict(fault)
    return parsed


def apply_faults(
    participants: Sequence[Participant],
    faults: Mapping[str, Mapping[str, Any]] | None,
    native_torch: bool = True,
) -> list[Participant]:
    """Return the run's participants with the faulty ones in place of their clean version.

    A faulty participant takes the place of the clean participant of the same name, or is
    appended when that one is not in the list. The fp64 reference cannot carry a fault.
    Call this before the pipeline adds the fp32 reference ``torch``: a faulty torch (ONNX
    models only) then runs next to the clean reference.

    Args:
        participants: The run's parsed participants.
        faults: ``RunOptions.extra.get("faults")``: participant spec → fault dict.
        native_torch: Whether torch runs the native module (zoo models), which has no
            fault injection (torch is faulted through its translators, for ONNX models).

    Raises:
        UsageError: Invalid fault, the fp64 reference or native torch as the faulty
            participant.
    """
    result = list(participants)
    for name, spec in parse_faults(faults or {}).items():
        if name == REFERENCE64:
            raise UsageError(f"the fp64 reference {REFERENCE64} cannot carry a fault")
        base = parse_participant(name)
        if base.library == "torch" and native_torch:
            raise UsageError(
                "torch runs the native module for zoo models, which has no fault "
                "injection; inject into another library, or give an ONNX file "
                "(torch then runs through its translators)"
            )
        faulty = faulty_participant(base, spec)
        names = [p.name for p in result]
        if name in names:
            result[names.index(name)] = faulty
        else:
            result.append(faulty)
    return result
