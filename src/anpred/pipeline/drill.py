"""The drill-down of a run with findings: plan it, run its jobs, judge operators.

After the analysis of a run with findings, :func:`run_drill` builds one drill graph with
the operators of every flagged stage (:mod:`anpred.interchange.drill_graph`), packs each
input's stage inputs from the fp64 reference's captures, and runs it in the fp64
reference first, then in every participant that finished (the flagged ones and the clean
ones: the population), with stage isolation cut at every operator: one extra worker job
per participant, whatever the number of flagged stages, each as small as the flagged
stages. The participants' transforms go with them (a fault's rewritten graphs are
rewritten again for the drill graph; per-node hooks apply unchanged), so an injected
fault is in the drill-down too. Then every operator output is judged by the oracle and
:mod:`anpred.localization.drilldown` names the first operator that introduces the error.

Everything is written under the run's ``drill/`` folder (:class:`~anpred.store.drill.DrillStore`);
the judgement of the operators is :mod:`anpred.pipeline.drill_judge`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from anpred.analysis.oracle import OracleParams
from anpred.backends.base import ModelJob
from anpred.calibration.stored import operator_params
from anpred.errors import UsageError
from anpred.execution.job import OBSERVER_KEY
from anpred.execution.schedule import resume_workers
from anpred.inject.onnx_rewrite import rewrite_model
from anpred.inject.plan import PlannedFault
from anpred.inject.stages import node_key
from anpred.inject.transforms import FAULT_KEY, FaultyGraphs, emulates_casts
from anpred.interchange.drill_graph import PACKED_INPUT, DrillGraph, build_drill_graph
from anpred.interchange.export import AnchoredExport
from anpred.interchange.transform import TRANSFORMS_KEY
from anpred.localization.drilldown import OpInfo, drill_targets, judge_target
from anpred.participants import REFERENCE32, REFERENCE64, Participant, parse_participant
from anpred.pipeline.drill_judge import operator_verdicts
from anpred.ports.spec import is_port
from anpred.progress import Say, quiet
from anpred.settings import ExecutionSettings
from anpred.store import RunStore, Status
from anpred.store.drill import DrillStore
from anpred.store.summary_drill import DrillDown, DrillTarget

if TYPE_CHECKING:
    from anpred.analysis.verdict import Verdict
    from anpred.store.participant import ParticipantStore
    from anpred.store.summary import Summary


def _save(model: onnx.ModelProto, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def _write_graphs(
    anchored: onnx.ModelProto, plain: onnx.ModelProto, export: AnchoredExport
) -> None:
    _save(anchored, export.anchored_path)
    _save(plain, export.plain_path)


def drill_transforms(
    run_store: RunStore,
    drill: DrillStore,
    participants: Sequence[Participant],
    graph: DrillGraph,
    export: AnchoredExport,
) -> dict[str, list[dict[str, Any]]]:
    """Each participant's transforms, as its worker in the run recorded them, made to fit
    the drill graph: a fault's rewritten graphs are rewritten from the drill graph (only
    the fault's nodes inside it; none there: no transform); other records go unchanged.
    """
    present = {node_key(n) for n in graph.anchored.graph.node}
    planned: dict[str, list[dict[str, Any]]] = {}
    for p in participants:
        folder = run_store.participant(p.name)
        status = folder.read_status() if folder.has_status() else {}
        records = []
        for record in status.get(TRANSFORMS_KEY) or []:
            if record.get("kind") != FaultyGraphs.kind:
                records.append(dict(record))
                continue
            fault = PlannedFault.from_record(record[FAULT_KEY])
            nodes = tuple(n for n in fault.nodes if n in present)
            if not nodes:
                continue
            rewritten = replace(export, folder=drill.participant_model_dir(p.name))
            emulate = emulates_casts(p.library)
            _write_graphs(
                rewrite_model(graph.anchored, fault.spec, nodes, emulate, p.library),
                rewrite_model(graph.plain, fault.spec, nodes, emulate, p.library),
                rewritten,
            )
            records.append(FaultyGraphs(replace(fault, nodes=nodes), rewritten.folder).record())
        if records:
            planned[p.name] = records
    return planned


#: Inputs whose fp64 stage inputs are computed again in one worker job (their captures
#: are on disk until the batch is packed): at most this many full fp64 captures at once.
REGENERATE_BATCH = 32

#: ``(input ids) -> folder holding the fp64 reference's captures of those inputs``.
Regenerate = Callable[[list[str]], "ParticipantStore"]


def _packed_inputs(
    run_store: RunStore,
    graph: DrillGraph,
    input_ids: Sequence[str],
    regenerate: Regenerate | None = None,
    say: Say = quiet,
) -> dict[str, np.ndarray]:
    """Each input's packed stage inputs, from the fp64 reference's captures.

    A run that went in chunks pruned the fp64 reference's captures of most inputs as it went
    (:mod:`anpred.pipeline.chunks`); the stage inputs they lost are computed again by
    ``regenerate`` (the fp64 reference run again on the run's own model), a batch of
    :data:`REGENERATE_BATCH` inputs at a time. The fp64 reference is deterministic on one
    machine, so they are the values it captured (tests/pipeline/test_chunks.py: the same
    drill-down as a run in one go). Inputs it could not compute again are left out, and
    ``say`` says which.
    """
    reference = run_store.participant(REFERENCE64)
    needed = {i.anchor for i in graph.inputs if i.anchor is not None}
    model_inputs = run_store.load_inputs() if any(i.anchor is None for i in graph.inputs) else {}
    done = [i for i in input_ids if reference.capture_done(i)]
    pruned = {i for i in done if needed & set(reference.pruned_keys(i))}
    kept = [i for i in done if i not in pruned]
    regenerated = [i for i in done if i in pruned]
    packed = {}

    def pack(input_id: str, capture: Mapping[str, np.ndarray]) -> None:
        values: dict[str | None, np.ndarray] = {
            i.anchor: capture[i.anchor] for i in graph.inputs if i.anchor is not None
        }
        if input_id in model_inputs:
            values[None] = model_inputs[input_id]
        packed[input_id] = graph.pack(values)

    for input_id in kept:
        pack(input_id, reference.load_capture(input_id))
    if regenerated and regenerate is not None:
        for start in range(0, len(regenerated), REGENERATE_BATCH):
            batch = regenerated[start : start + REGENERATE_BATCH]
            source = regenerate(batch)
            for input_id in batch:
                if source.capture_done(input_id):
                    pack(input_id, source.load_capture(input_id))
        lost = [i for i in regenerated if i not in packed]
        if lost:
            say(
                f"drill-down: the fp64 reference did not compute the stage inputs of "
                f"{len(lost)} of {len(regenerated)} pruned inputs again ({_listed(lost)}); "
                f"the drill-down judges the other {len(packed)} inputs"
            )
    return {i: packed[i] for i in input_ids if i in packed}


def _listed(names: Sequence[str], shown: int = 3) -> str:
    """The first ``shown`` names, and how many more."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def _regenerator(run_store: RunStore, drill: DrillStore, settings: ExecutionSettings) -> Regenerate:
    """The fp64 reference's worker job again, on the run's own model and inputs, without
    the observer check and stage isolation; each batch replaces the one before.
    """
    recorded = run_store.participant(REFERENCE64).read_job()
    job = {"model": recorded["model"], "inputs": str(run_store.inputs_path), OBSERVER_KEY: []}
    side = drill.reference_run
    alone = replace(settings, parallel=1)

    def regenerate(input_ids: list[str]) -> ParticipantStore:
        drill.remove_reference_run()
        side.root.mkdir(parents=True)
        settings.say(
            f"drill-down: fp64 stage inputs of {len(input_ids)} pruned inputs computed again"
        )
        resume_workers(side.root, [parse_participant(REFERENCE64)], job, input_ids, alone)
        return side.participant(REFERENCE64)

    return regenerate


def run_drill(
    run_dir: Path,
    participants: Sequence[Participant],
    summary: Summary,
    settings: ExecutionSettings,
    params: OracleParams | None = None,
) -> DrillDown | None:
    """Drill from the run's flagged stages down to operators (see the module doc).

    Args:
        run_dir: The run directory (analysed: ``summary`` is its summary).
        participants: The run's participants (fp32 reference included, fp64 not).
        summary: The run's summary.
        settings: How the workers run (resolved) and where progress goes.
        params: Oracle parameters (default: the oracle's defaults, computing only the
            primary metric, the one that decides). A calibration in them judges each
            operator with its stage's factor where one applies
            (:func:`~anpred.calibration.stored.operator_params`).

    Returns:
        The drill-down record (also written to the run's ``drill/``), or ``None`` when the
        run has no findings to drill into. A resumed run whose drill-down of the same
        (participant, stage) pairs finished reuses it.
    """
    started = time.perf_counter()
    targets = drill_targets(summary.findings, summary.anchor_keys)
    # a user's port runs its own code, not a graph: its anchor is already one of its layers
    targets = {p: per for p, per in targets.items() if not is_port(p)}
    if not targets:
        return None
    earlier = _finished_earlier(run_dir, targets)
    if earlier is not None:
        settings.say("drill-down: already done (resumed)")
        return earlier
    run_store = RunStore(run_dir)
    drill = DrillStore(run_dir)
    drill.clear()

    def done(record: DrillDown) -> DrillDown:
        record = replace(record, wall_seconds=round(time.perf_counter() - started, 2))
        drill.write_record(record.to_dict())
        drill.prune_arrays()  # judged: the record holds what the report shows
        return record

    stages = sorted({s for per in targets.values() for s in per}, key=summary.anchor_keys.index)
    try:
        graph, drill_export = _drill_model(run_store, drill, stages)
    except UsageError as err:
        return done(DrillDown((), reason=f"cannot build the drill graph: {err}"))
    regenerate = _regenerator(run_store, drill, settings)
    packed = _packed_inputs(run_store, graph, summary.input_ids, regenerate, settings.say)
    drill.remove_reference_run()
    if not packed:
        return done(DrillDown((), reason="the fp64 reference has no capture to start from"))
    drill.run.write_inputs(packed, {})
    input_ids = list(packed)
    finished = run_store.read_participants()
    population = [p for p in participants if p.name in finished and not _failed(finished[p.name])]
    job = _drill_job(run_store, drill, population, graph, drill_export)
    settings.say(
        f"drill-down: {len(graph.ops)} operators of {', '.join(stages)} in "
        f"{len(population)} participants + fp64 reference"
    )
    failed = run_with_reference(drill.root, population, job, input_ids, settings)
    if REFERENCE64 in failed or REFERENCE32 in failed:
        return done(DrillDown((), failed=failed, reason="the drill-down's references failed"))
    names = [p.name for p in population if p.name not in failed]
    params = params or OracleParams(metrics=())  # the primary metric decides; no others
    params = operator_params(params, {o.key: o.stage for o in graph.ops})
    verdicts = operator_verdicts(drill.root, names, [o.key for o in graph.ops], input_ids, params)
    records = _judged_targets(targets, graph, verdicts, input_ids, failed)
    return done(DrillDown(records, tuple(names), failed))


def _finished_earlier(run_dir: Path, targets: Mapping[str, Sequence[str]]) -> DrillDown | None:
    """The run directory's drill-down, when it finished for the same (participant, stage)
    pairs (a resumed run reuses it); else ``None``.
    """
    earlier = load_drill(run_dir)
    if earlier is None or earlier.reason or earlier.failed:
        return None
    wanted = {(p, s) for p, per in targets.items() for s in per}
    return earlier if {(t.participant, t.stage) for t in earlier.targets} == wanted else None


def _drill_model(
    run_store: RunStore, drill: DrillStore, stages: Sequence[str]
) -> tuple[DrillGraph, AnchoredExport]:
    """The drill graph of ``stages`` (their operators, each an anchor), written as the
    drill-down's anchored export.

    Raises:
        UsageError: The drill graph cannot be built.
    """
    export = AnchoredExport.from_dict(run_store.read_export())
    graph = build_drill_graph(
        onnx.load(str(export.anchored_path)),
        export.anchors,
        export.input_name,
        export.input_shape,
        stages,
    )
    drill_export = AnchoredExport(
        drill.model_dir,
        PACKED_INPUT,
        (graph.packed_size,),
        export.opset,
        tuple(graph.anchors()),
    )
    _write_graphs(graph.anchored, graph.plain, drill_export)
    drill.run.write_export(drill_export.to_dict())
    return graph, drill_export


def _drill_job(
    run_store: RunStore,
    drill: DrillStore,
    population: Sequence[Participant],
    graph: DrillGraph,
    drill_export: AnchoredExport,
) -> dict[str, Any]:
    """The drill-down's worker job: its model, its packed inputs and each participant's
    transforms made to fit the drill graph (:func:`drill_transforms`).
    """
    job: dict[str, Any] = {
        "model": ModelJob(drill_export).to_dict(),
        "inputs": str(drill.run.inputs_path),
    }
    transforms = drill_transforms(run_store, drill, population, graph, drill_export)
    if transforms:
        job[TRANSFORMS_KEY] = transforms
    return job


def run_with_reference(
    root: Path,
    population: Sequence[Participant],
    job: Mapping[str, Any],
    input_ids: Sequence[str],
    settings: ExecutionSettings,
) -> dict[str, str]:
    """Run ``job`` in the fp64 reference, then in ``population`` with stage isolation fed
    from the reference's captures (the drill-down's jobs, and ``anpred repro``'s trials).

    Returns:
        Participant → why its job failed (``status at step: message``), for the failed ones.
    """
    results = {}
    reference = parse_participant(REFERENCE64)
    source = RunStore(root).participant(REFERENCE64)
    for group, isolation in (([reference], None), (population, source.folder)):
        results.update(
            resume_workers(root, group, job, input_ids, settings, isolation_source=isolation)
        )
    return {
        name: f"{r.status} at {r.step}: {r.message}"[:300]
        for name, r in results.items()
        if r.failed
    }


def _judged_targets(
    targets: Mapping[str, Sequence[str]],
    graph: DrillGraph,
    verdicts: Mapping[tuple[str, str, str], Verdict],
    input_ids: Sequence[str],
    failed: Mapping[str, str],
) -> tuple[DrillTarget, ...]:
    """Each flagged (participant, stage): the operator that introduces its error, judged
    from the operators' verdicts (:func:`anpred.localization.drilldown.judge_target`).
    """
    records = []
    for participant, per in targets.items():
        for stage in per:
            ops = [
                OpInfo(o.key, o.node, o.op_type, o.module, o.stage)
                for o in graph.ops
                if o.stage == stage
            ]
            target = judge_target(participant, stage, ops, verdicts, input_ids)
            if participant in failed:
                target = replace(target, reason=f"its drill job failed ({failed[participant]})")
            records.append(target)
    return tuple(records)


def _failed(record: Mapping[str, Any]) -> bool:
    return Status.parse(record.get("status")).failed


def load_drill(run_dir: Path) -> DrillDown | None:
    """The drill-down recorded in a run directory, or ``None``."""
    drill = DrillStore(run_dir)
    return DrillDown.from_dict(drill.read_record()) if drill.has_record() else None
