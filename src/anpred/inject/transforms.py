"""Faults as transforms: planned in the main process, applied around any runner.

A fault reaches its participant's worker as one of two transforms
(:mod:`anpred.interchange.transform`), both carrying the planned fault's record (the ground
truth the worker writes into its status record):

* :class:`FaultyGraphs`: the export's anchored and plain graphs rewritten here, before the
  worker starts (:func:`~anpred.inject.onnx_rewrite.rewrite_model`), into a folder of the
  participant; the job's export points at them. For libraries that load the ONNX file
  (onnxruntime, OpenVINO) and for attribute faults everywhere;
* :class:`FaultNodeHooks`: per-node hooks (:class:`~anpred.inject.hooks.FaultHooks`), built
  in the worker from the plan so that the fault computes with the library's own
  operators inside its traced/compiled function. For libraries run through anpred's
  translators.

Importing this module imports no DL library.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx

from anpred.inject.onnx_rewrite import rewrite_model
from anpred.inject.participants import faulty_name, parse_faults
from anpred.inject.plan import PlannedFault, plan_fault
from anpred.inject.spec import FaultSpec, Target, fault_kind
from anpred.interchange.export import AnchoredExport
from anpred.interchange.loaded import load_shared
from anpred.interchange.transform import (
    TRANSFORMS_KEY,
    NodeHooks,
    Transform,
    register_transform,
)
from anpred.participants import parse_participant

if TYPE_CHECKING:
    from anpred.backends.base import ModelJob

#: Key of the planned fault in a fault transform's record.
FAULT_KEY = "fault"
#: Libraries whose graph transformations remove ``Cast`` pairs: their bfloat16/float16
#: round trips are emulated in float arithmetic (see :mod:`anpred.inject.onnx_rewrite`).
CASTS_REMOVED = frozenset({"openvino"})


def emulates_casts(library: str) -> bool:
    """Whether ``library``'s faulted graphs round with arithmetic instead of ``Cast`` pairs:
    the libraries of :data:`CASTS_REMOVED`, and every deployment runtime (converters fold
    or reject ``Cast`` pairs: MNN 3.6.1 cannot cast to bfloat16, onnxslim folds pairs).
    """
    from anpred.library import Loads, get_library

    return library in CASTS_REMOVED or get_library(library).loads == Loads.CONVERTED_ARTIFACT


@register_transform
class FaultyGraphs(Transform):
    """A fault applied by rewritten graphs: the job's export points at ``folder``.

    Args:
        planned: The fault and the nodes it hits.
        folder: Export folder holding the rewritten anchored and plain graphs.
    """

    kind = "fault-graphs"

    def __init__(self, planned: PlannedFault, folder: Path) -> None:
        self.planned = planned
        self.folder = Path(folder)

    def params(self) -> dict[str, Any]:
        return {FAULT_KEY: self.planned.record(), "folder": str(self.folder)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> FaultyGraphs:
        return cls(PlannedFault.from_record(params[FAULT_KEY]), Path(params["folder"]))

    def model(self, job: ModelJob) -> ModelJob:
        return replace(job, export=replace(job.export, folder=self.folder))


@register_transform
class FaultNodeHooks(Transform):
    """A fault applied by per-node hooks, computed with the library's own operators."""

    kind = "fault-hooks"

    def __init__(self, planned: PlannedFault) -> None:
        self.planned = planned

    def params(self) -> dict[str, Any]:
        return {FAULT_KEY: self.planned.record()}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> FaultNodeHooks:
        return cls(PlannedFault.from_record(params[FAULT_KEY]))

    def node_hooks(self, library: str) -> NodeHooks:
        from anpred.inject.hooks import FaultHooks
        from anpred.inject.math import library_math

        hooks = FaultHooks(self.planned.spec, self.planned.nodes, library_math(library))
        return NodeHooks(pre=hooks.pre, post=hooks.post)


def _runs_translators(library: str) -> bool:
    """Whether ``library`` executes a faulted ONNX graph through anpred's translators
    (torch does for ONNX files; for zoo models :func:`apply_faults` refuses it).
    """
    from anpred.library import Loads, get_library

    return get_library(library).loads in (Loads.TRANSLATED_ONNX, Loads.NATIVE_MODULE)


def _save(model: onnx.ModelProto, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    onnx.save(model, str(tmp))
    os.replace(tmp, path)


def _hooked(library: str, spec: FaultSpec) -> bool:
    """Whether ``spec`` reaches a participant of ``library`` as hooks (no graph rewritten)."""
    return fault_kind(spec.kind).target is not Target.ATTRIBUTE and _runs_translators(library)


def fault_transform(
    library: str, spec: FaultSpec, export: AnchoredExport, folder: Path, graphs: bool = True
) -> Transform:
    """Plan ``spec`` for a participant of ``library``; rewrite graphs into ``folder`` if needed.

    ``graphs=False``: the rewritten graphs are left to the participant's resumed worker
    (:func:`deferred_graphs`).

    Raises:
        UsageError: Invalid fault, unknown stage, or no node matches.
    """
    anchored = load_shared(export.anchored_path)  # one per campaign model: not modified
    planned = plan_fault(spec, export, anchored)
    if _hooked(library, spec):
        return FaultNodeHooks(planned)
    rewritten = replace(export, folder=Path(folder))
    rewritten.folder.mkdir(parents=True, exist_ok=True)
    if graphs:
        for model, path in (
            (anchored, rewritten.anchored_path),
            (load_shared(export.plain_path), rewritten.plain_path),
        ):
            faulty = rewrite_model(
                model, spec, planned.nodes, emulate_casts=emulates_casts(library), library=library
            )
            _save(faulty, path)
    return FaultyGraphs(planned, rewritten.folder)


#: Libraries whose runners, in a worker that resumes (``Runner.resuming``), read the
#: export's graphs only if they run the whole model after all: onnxruntime, OpenVINO and
#: the translators (``anpred.backends``); a converted runtime loads them at once.
_LAZY_WHOLE_MODEL = ("onnx-file", "translated-onnx")


def deferred_graphs(
    library: str, spec: FaultSpec, export: AnchoredExport, folder: Path, nodes: Sequence[str]
) -> dict[str, Any] | None:
    """What a resumed worker needs to rewrite the faulty graphs itself, or ``None`` when
    :func:`fault_transform` must write them (its runner loads them at once) or writes none.

    A resumed worker cuts its programs from the faulty anchored graph, which it rewrites
    from the clean one it holds already (a served process parses the clean graph once, and
    infers its value types once): writing the rewritten graph here and parsing it there cost
    ~0.045 CPU s a yolov8n fault run (issue 41). The files, anchored and plain (the plain
    one for the observer check), are written only when the worker runs the whole model
    after all (:func:`write_deferred_graphs`).

    Args:
        library: The faulty participant's library.
        spec: The fault.
        export: The clean run's export (the graphs are rewritten from its own).
        folder: Where :func:`fault_transform` would rewrite the graphs.
        nodes: The planned fault's nodes.
    """
    from anpred.library import get_library

    if _hooked(library, spec) or get_library(library).loads.value not in _LAZY_WHOLE_MODEL:
        return None
    rewritten = replace(export, folder=Path(folder))
    return {
        "anchored": [str(export.anchored_path), str(rewritten.anchored_path)],
        "plain": [str(export.plain_path), str(rewritten.plain_path)],
        "fault": {**spec.to_dict(), "nodes": list(nodes)},
        "emulate_casts": emulates_casts(library),
        "library": library,
    }


def deferred_graph(deferred: Mapping[str, Any], which: str) -> onnx.ModelProto:
    """The faulty ``anchored`` or ``plain`` graph :func:`deferred_graphs` describes: the
    graph :func:`fault_transform` writes.
    """
    fault = dict(deferred["fault"])
    nodes = fault.pop("nodes")
    return rewrite_model(
        load_shared(deferred[which][0]),
        FaultSpec.from_dict(fault),
        nodes,
        emulate_casts=bool(deferred["emulate_casts"]),
        library=deferred["library"],
    )


def write_deferred_graphs(
    deferred: Mapping[str, Any], anchored: onnx.ModelProto | None = None
) -> None:
    """Write the faulty graphs :func:`deferred_graphs` describes (those not written yet;
    ``anchored``: the anchored one, rewritten already).
    """
    for which in ("anchored", "plain"):
        path = Path(deferred[which][1])
        if path.is_file():
            continue
        model = anchored if which == "anchored" and anchored is not None else None
        path.parent.mkdir(parents=True, exist_ok=True)
        _save(model if model is not None else deferred_graph(deferred, which), path)


def fault_transforms(
    faults: Mapping[str, Mapping[str, Any]],
    export: AnchoredExport,
    folder_of: Callable[[str], Path],
    deferred: Collection[str] = (),
) -> dict[str, list[dict[str, Any]]]:
    """Every faulty participant's transform records (``RunOptions.extra["faults"]``).

    Args:
        faults: Participant spec → fault dict.
        export: The run's anchored export.
        folder_of: Participant name → the folder its rewritten graphs go to.
        deferred: Faulty participants whose resumed worker rewrites their graphs
            (:func:`deferred_graphs`).

    Returns:
        Faulty participant name (``onnxruntime!bf16@s2``) → ``[record]``.
    """
    records = {}
    for name, spec in parse_faults(faults).items():
        faulty = faulty_name(name, spec)
        library = parse_participant(name).library
        graphs = faulty not in deferred
        transform = fault_transform(library, spec, export, folder_of(faulty), graphs)
        records[faulty] = [transform.record()]
    return records


def recorded_fault(status: Mapping[str, Any]) -> dict[str, Any] | None:
    """The planned fault a worker's status record says it applied, or ``None``."""
    for record in status.get(TRANSFORMS_KEY) or []:
        if FAULT_KEY in record:
            return dict(record[FAULT_KEY])
    return None
