"""A fault resolved against one export: the spec plus the nodes it hits.

The main process plans a fault (:func:`plan_fault`) before the worker starts and hands it
to the worker as a transform (:mod:`anpred.inject.transforms`); the plan's
:meth:`PlannedFault.record` travels in that transform's record, which the worker writes
into its status record: the ground truth of what was injected where.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import onnx

from anpred.inject.spec import FaultSpec, fault_kind
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

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> PlannedFault:
        """Inverse of :meth:`record`.

        Raises:
            UsageError: An invalid fault.
        """
        return cls(FaultSpec.from_dict(record), tuple(record["nodes"]))


def stage_anchors(export: AnchoredExport) -> list[StageAnchor]:
    """The export's anchors, in order, as stage mapping needs them."""
    return [StageAnchor(a.key, a.onnx_name) for a in export.anchors]


def plan_fault(
    spec: FaultSpec, export: AnchoredExport, anchored: onnx.ModelProto | None = None
) -> PlannedFault:
    """Resolve ``spec`` against ``export``: the nodes it hits.

    Args:
        spec: The fault.
        export: The anchored export.
        anchored: The loaded anchored model (loaded from the export when omitted).

    Raises:
        UsageError: Invalid fault, unknown stage, or no node matches.
    """
    model = anchored if anchored is not None else onnx.load(str(export.anchored_path))
    return PlannedFault(spec, tuple(resolve_targets(model, stage_anchors(export), spec)))
