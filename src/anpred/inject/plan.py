"""A fault resolved against one export: the spec plus the nodes it hits.

Runners call :func:`plan_fault` with their settings when they activate; the plan's
:meth:`PlannedFault.record` goes into ``describe_settings()`` and so into the worker's
``status.json``: the ground truth of what was injected where.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import onnx

from anpred.inject.spec import FaultSpec, fault_from_settings, fault_kind
from anpred.inject.stages import StageAnchor, resolve_targets
from anpred.interchange.export import AnchoredExport


@dataclass(frozen=True)
class PlannedFault:
    """A fault and the keys of the nodes it applies to (graph order)."""

    spec: FaultSpec
    nodes: tuple[str, ...]

    @property
    def target(self) -> str:
        """What the kind changes (``output``, ``input``, ``attribute``)."""
        return fault_kind(self.spec.kind).target.value

    def record(self) -> dict[str, Any]:
        """The ground-truth record: spec, label, what it acts on and the nodes."""
        return {
            **self.spec.to_dict(),
            "label": self.spec.label,
            "acts_on": self.target,
            "nodes": list(self.nodes),
        }


def stage_anchors(export: AnchoredExport) -> list[StageAnchor]:
    """The export's anchors, in order, as stage mapping needs them."""
    return [StageAnchor(a.key, a.onnx_name) for a in export.anchors]


def plan_fault(
    settings: Mapping[str, Any], export: AnchoredExport, anchored: onnx.ModelProto | None = None
) -> PlannedFault | None:
    """Resolve the fault a participant's settings carry against ``export``.

    Args:
        settings: Participant settings (the fault under ``"fault"``).
        export: The anchored export.
        anchored: The loaded anchored model (loaded from the export when omitted).

    Returns:
        The plan, or ``None`` when the settings carry no fault.

    Raises:
        UsageError: Invalid fault, unknown stage, or no node matches.
    """
    spec = fault_from_settings(settings)
    if spec is None:
        return None
    model = anchored if anchored is not None else onnx.load(str(export.anchored_path))
    return PlannedFault(spec, tuple(resolve_targets(model, stage_anchors(export), spec)))
