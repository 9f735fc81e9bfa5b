"""One round of a reduction: a batch of cases run by the fp64 reference and the population.

A trial is a small run of its own, like the drill-down (:mod:`anpred.pipeline.drill`): the
batch graph (:func:`~anpred.repro.subgraph.batch_graph`) and its packed inputs are written
into a nested run store, the fp64 reference runs it first, then every participant of the
drill-down's population, with stage isolation against the reference; each participant's
transforms go with it (an injected fault is rewritten onto every copy of its nodes), so a
case is judged exactly as the drill-down judged the stage. The oracle then judges each
case's target operator as the drill-down judges operators.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from anpred.analysis.alignment import AlignmentError, align
from anpred.analysis.oracle import OracleParams
from anpred.backends.base import ModelJob
from anpred.calibration.stored import operator_params
from anpred.inject.onnx_rewrite import rewrite_model
from anpred.inject.plan import PlannedFault
from anpred.inject.transforms import FAULT_KEY, FaultNodeHooks, FaultyGraphs, emulates_casts
from anpred.interchange.export import AnchoredExport
from anpred.interchange.transform import TRANSFORMS_KEY
from anpred.participants import REFERENCE64, Participant, parse_participant
from anpred.pipeline.drill import run_with_reference
from anpred.pipeline.drill_judge import operator_verdicts  # the drill-down's own judgement
from anpred.progress import Say, quiet
from anpred.repro.subgraph import BATCH_INPUT, Batch
from anpred.settings import ExecutionSettings
from anpred.store import RunStore

if TYPE_CHECKING:
    from anpred.analysis.verdict import Verdict


@dataclass(frozen=True)
class TrialSettings:
    """How trials run (one typed record instead of threaded arguments).

    Attributes:
        population: The participants judged together (the drill-down's population).
        transforms: Participant → its transform records in the run (faults).
        params: Oracle parameters (the run's calibration, if any).
        execution: How the workers run (resolved: threads, parallel, timeout, executor);
            the workers' own progress lines are not printed.
        say: Progress printer (one line per round).
    """

    population: tuple[Participant, ...]
    transforms: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    params: OracleParams | None = None
    execution: ExecutionSettings = field(
        default_factory=lambda: ExecutionSettings(parallel=2, max_memory=None).quiet()
    )
    say: Say = quiet


@dataclass
class TrialResult:
    """What one trial gave.

    Attributes:
        root: The trial's run store folder.
        verdicts: ``{(participant, anchor key, input): verdict}`` of every case target.
        failed: Participant → why its job gave nothing.
        input_ids: The inputs judged.
    """

    root: Path
    verdicts: dict[tuple[str, str, str], Verdict]
    failed: dict[str, str]
    input_ids: list[str]

    def capture(self, participant: str, input_id: str, key: str) -> np.ndarray | None:
        """A participant's capture of anchor ``key`` on one input (``None``: missing)."""
        store = RunStore(self.root).participant(participant)
        if not store.capture_done(input_id):
            return None
        values = store.load_capture(input_id)
        return values.get(key)

    def aligned(
        self, participant: str, input_id: str, key: str, reference: np.ndarray
    ) -> np.ndarray | None:
        """A participant's capture of anchor ``key`` on one input aligned to ``reference``
        (``None``: missing, or it does not align).
        """
        capture = RunStore(self.root).participant(participant).open_capture(input_id)
        if capture is None:
            return None
        try:
            return align(
                capture[key], reference.shape, capture.layout(key), reference=reference
            ).values
        except (AlignmentError, KeyError):
            return None
        finally:
            capture.close()


def relative_error(x: np.ndarray, ref: np.ndarray) -> float:
    """``‖x − ref‖ / ‖ref‖`` in float64 (``inf`` for a zero ``ref``)."""
    norm = float(np.linalg.norm(ref))
    return float(np.linalg.norm(x.astype(np.float64) - ref)) / norm if norm else math.inf


def participants_of(run_store: RunStore, names: Sequence[str]) -> list[Participant]:
    """The participants ``names`` as the run's jobs ran them (settings included)."""
    found = []
    for name in names:
        folder = run_store.participant(name)
        try:
            record = folder.read_job()["participant"]
            found.append(
                Participant(
                    record["name"],
                    record["library"],
                    record.get("config", ""),
                    dict(record.get("settings") or {}),
                )
            )
        except (OSError, KeyError, ValueError):
            found.append(parse_participant(name))
    return found


def recorded_transforms(run_store: RunStore, names: Sequence[str]) -> dict[str, list[dict]]:
    """Each participant's transform records, as its worker in the run recorded them."""
    planned = {}
    for name in names:
        folder = run_store.participant(name)
        status = folder.read_status() if folder.has_status() else {}
        records = [dict(r) for r in status.get(TRANSFORMS_KEY) or []]
        if records:
            planned[name] = records
    return planned


def _save(model: onnx.ModelProto, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def _batch_transforms(
    batch: Batch, settings: TrialSettings, store: RunStore, export: AnchoredExport
) -> dict[str, list[dict[str, Any]]]:
    """The participants' transforms made to fit the batch graph: a fault hits every copy
    of its nodes (none in the batch: no transform); other records go unchanged.
    """
    planned: dict[str, list[dict[str, Any]]] = {}
    for p in settings.population:
        records = []
        for record in settings.transforms.get(p.name, []):
            if FAULT_KEY not in record:
                records.append(dict(record))
                continue
            fault = PlannedFault.from_record(record[FAULT_KEY])
            nodes = tuple(
                name for i in range(len(batch.cases)) for name in batch.node_names(i, fault.nodes)
            )
            if not nodes:
                continue
            moved = replace(fault, nodes=nodes)
            if record.get("kind") == FaultyGraphs.kind:
                folder = store.participant(p.name).folder / "model"
                emulate = emulates_casts(p.library)
                rewritten = replace(export, folder=folder)
                for model, path in (
                    (batch.anchored, rewritten.anchored_path),
                    (batch.plain, rewritten.plain_path),
                ):
                    _save(rewrite_model(model, fault.spec, nodes, emulate, p.library), path)
                records.append(FaultyGraphs(moved, folder).record())
            else:
                records.append(FaultNodeHooks(moved).record())
        if records:
            planned[p.name] = records
    return planned


def run_trial(
    root: Path,
    batch: Batch,
    packed: Mapping[str, np.ndarray],
    settings: TrialSettings,
    participants: Sequence[Participant] | None = None,
    judge: bool = True,
) -> TrialResult:
    """Run ``batch`` on the packed inputs and judge every case's target.

    Args:
        root: An empty (or absent) folder for the trial's run store; emptied first.
        batch: The cases.
        packed: Input id → packed input (:meth:`Batch.pack`).
        settings: Population, transforms, oracle parameters, workers.
        participants: Who runs besides the fp64 reference (default: the population).
        judge: Whether to judge with the oracle (a bisection only reads captures).
    """
    if root.exists():
        shutil.rmtree(root)
    store = RunStore(root)
    root.mkdir(parents=True)
    opset = max((o.version for o in batch.anchored.opset_import if o.domain in ("", "ai.onnx")),
                default=13)  # fmt: skip
    export = AnchoredExport(root / "model", BATCH_INPUT, (batch.packed_size,), opset,
                            tuple(batch.anchors))  # fmt: skip
    _save(batch.anchored, export.anchored_path)
    _save(batch.plain, export.plain_path)
    store.write_export(export.to_dict())
    store.write_inputs(dict(packed), {})
    input_ids = list(packed)
    population = list(participants if participants is not None else settings.population)
    job: dict[str, Any] = {"model": ModelJob(export).to_dict(), "inputs": str(store.inputs_path)}
    transforms = _batch_transforms(batch, replace(settings, population=tuple(population)),
                                   store, export)  # fmt: skip
    if transforms:
        job[TRANSFORMS_KEY] = transforms
    failed = run_with_reference(root, population, job, input_ids, settings.execution)
    verdicts: dict[tuple[str, str, str], Verdict] = {}
    names = [p.name for p in population if p.name not in failed]
    if judge and REFERENCE64 not in failed:
        keys = [a.key for a in batch.anchors if a.key != "output"]
        params = settings.params or OracleParams(metrics=())
        params = operator_params(params, {a.key: a.group for a in batch.anchors})
        verdicts = operator_verdicts(root, names, keys, input_ids, params)
    return TrialResult(root, verdicts, failed, input_ids)
