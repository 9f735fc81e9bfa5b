"""``anpred repro``: from a run's drilled findings to verified reproducer folders.

For every drilled finding with a named operator (or the one ``--finding`` names):

1. the drill graph is built again from the run's anchored model (the same stages, so the
   same operator keys; checked against the drill-down's record), and the fp64 reference
   runs it once to capture every operator output (the drill-down judged them and deleted
   its arrays);
2. the reduction (:mod:`anpred.repro.reduce`) finds the smallest case with the same symptom;
3. the folder is written (:mod:`anpred.repro.folder`): ``model.onnx``, ``inputs.npz``,
   ``expected_fp64.npz``, ``floor.json``, ``repro_<library>.py``; the script is run in the
   library's own environment (:mod:`anpred.repro.verify`); then ``README.md`` and
   ``repro.json``; with ``bisect``, the settings bisection first (:mod:`anpred.repro.bisect`).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx

from anpred.analysis.oracle import OracleParams
from anpred.backends.base import ModelJob
from anpred.calibration.stored import with_stored_calibration
from anpred.errors import UsageError
from anpred.execution.schedule import resume_workers
from anpred.interchange.drill_graph import PACKED_INPUT, DrillGraph, build_drill_graph
from anpred.interchange.export import AnchoredExport
from anpred.participants import REFERENCE64, parse_participant
from anpred.progress import Say, quiet
from anpred.report.html import write_report
from anpred.repro.folder import write_folder
from anpred.repro.reduce import Reducer, Reduction
from anpred.repro.subgraph import StageCases
from anpred.repro.symptom import Symptom, symptom_of
from anpred.repro.trial import (
    TrialSettings,
    participants_of,
    recorded_transforms,
)
from anpred.settings import ExecutionSettings
from anpred.store import RunStore
from anpred.store.drill import DrillStore
from anpred.store.repro_record import (
    REPRO_FOLDER,
    ReproRecord,
    Status,
    load_reproducers,
    write_index,
)
from anpred.store.summary import Summary
from anpred.store.summary_drill import DrillDown


@dataclass(frozen=True)
class ReproOptions:
    """What ``anpred repro`` was asked.

    Attributes:
        finding: ``PARTICIPANT@STAGE`` to reproduce (``None``: every drilled finding).
        out: Where the folders go (default ``RUN_DIR/repro``).
        bisect: Also search the library's switches for the setting that causes it.
        verify: Run each script in its library's environment (tests may skip it).
        threads: Threads per worker; ``parallel``: workers at a time;
            ``timeout``: seconds per worker.
        keep_work: Keep the trials' run stores (``OUT/work``) for inspection.
        baseline: Also write the stage cut alone as a reproducer (``<folder>.stage``), the
            baseline ``benchmarks/bench_repro.py`` compares with; its verification goes
            into the record's ``stage_baseline``.
    """

    finding: str | None = None
    out: Path | None = None
    bisect: bool = False
    verify: bool = True
    threads: int = 1
    parallel: int = 2
    timeout: float | None = None
    keep_work: bool = False
    baseline: bool = False


@dataclass
class RunContext:
    """What every finding of one run shares: the drill graph, inputs, fp64 values."""

    run_dir: Path
    store: RunStore
    drill: DrillDown
    graph: DrillGraph
    packed: dict[str, np.ndarray]
    fp64: dict[str, dict[str, np.ndarray]]
    ops_in_model: int
    settings: TrialSettings


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@=-]+", "_", name)


def drilled_findings(drill: DrillDown) -> list[Symptom]:
    """Every drilled (participant, stage) with a named operator, as a symptom."""
    found = [symptom_of(drill, t) for t in drill.targets]
    return [s for s in found if s is not None]


def select(symptoms: Sequence[Symptom], finding: str | None, drill: DrillDown) -> list[Symptom]:
    """The symptoms ``--finding`` selects (all when ``None``).

    Raises:
        UsageError: The finding is malformed, not drilled, or has no named operator.
    """
    if finding is None:
        return list(symptoms)
    participant, at, stage = finding.rpartition("@")
    if not at or not participant or not stage:
        raise UsageError(f"--finding must be PARTICIPANT@ANCHOR, not {finding!r}")
    chosen = [s for s in symptoms if s.participant == participant and s.stage == stage]
    if chosen:
        return chosen
    target = drill.target(participant, stage)
    if target is not None:
        raise UsageError(f"the drill-down named no operator for {finding}: {target.reason}")
    drilled = ", ".join(f"{t.participant}@{t.stage}" for t in drill.targets) or "none"
    raise UsageError(f"{finding} was not drilled into; drilled findings: {drilled}")


def load_drill_down(run_dir: Path) -> DrillDown:
    """The run's drill-down record.

    Raises:
        UsageError: Not a run directory, or a run without a drill-down.
    """
    store = RunStore(run_dir)
    if not store.has_summary():
        raise UsageError(f"{run_dir} is not an analysed run directory (no summary.json)")
    drill = DrillStore(run_dir)
    if not drill.has_record():
        raise UsageError(
            f"{run_dir} has no drill-down (a run without findings, or run with --no-drill)"
        )
    record = DrillDown.from_dict(drill.read_record())
    if record.reason:
        raise UsageError(f"the run's drill-down did not run: {record.reason}")
    return record


def _fp64_values(
    context_root: Path, graph: DrillGraph, packed: dict[str, np.ndarray], settings: TrialSettings
) -> dict[str, dict[str, np.ndarray]]:
    """The fp64 reference's value of every operator anchor of the drill graph, per input."""
    root = context_root / "fp64"
    if root.exists():
        shutil.rmtree(root)
    store = RunStore(root)
    root.mkdir(parents=True)
    opset = max((o.version for o in graph.anchored.opset_import if o.domain in ("", "ai.onnx")),
                default=13)  # fmt: skip
    export = AnchoredExport(root / "model", PACKED_INPUT, (graph.packed_size,), opset,
                            tuple(graph.anchors()))  # fmt: skip
    export.folder.mkdir(parents=True)
    onnx.save(graph.anchored, str(export.anchored_path))
    onnx.save(graph.plain, str(export.plain_path))
    store.write_export(export.to_dict())
    store.write_inputs(packed, {})
    job = {"model": ModelJob(export).to_dict(), "inputs": str(store.inputs_path)}
    settings.say("repro: the fp64 reference computes every operator of the drilled stages")
    alone = replace(settings.execution, parallel=1)
    results = resume_workers(root, [parse_participant(REFERENCE64)], job, list(packed), alone)
    result = results[REFERENCE64]
    if result.failed:
        raise UsageError(f"the fp64 reference failed on the drill graph: {result.message}")
    reference = store.participant(REFERENCE64)
    keys = [o.key for o in graph.ops]
    return {i: {k: v for k, v in reference.load_capture(i).items() if k in keys} for i in packed}


def _drill_graph(store: RunStore, drill: DrillDown) -> DrillGraph:
    """The run's drill graph built again, checked against the drill-down's record."""
    export = AnchoredExport.from_dict(store.read_export())
    order = [a.key for a in export.anchors]
    stages = sorted({t.stage for t in drill.targets}, key=order.index)
    graph = build_drill_graph(onnx.load(str(export.anchored_path)), export.anchors,
                              export.input_name, export.input_shape, stages)  # fmt: skip
    nodes = {o.key: o.node for o in graph.ops}
    for t in drill.targets:
        for op in t.ops:
            if nodes.get(op.key) != op.node:
                raise UsageError(
                    f"the drill graph built again differs from the drill-down's ({op.key}: "
                    f"{op.node} vs {nodes.get(op.key)}); run the drill-down again"
                )
    return graph


def model_ops(store: RunStore) -> int:
    """Operators of the run's model (its plain graph, ``Constant`` nodes left out)."""
    export = AnchoredExport.from_dict(store.read_export())
    model = onnx.load(str(export.plain_path), load_external_data=False)
    return sum(1 for n in model.graph.node if n.op_type != "Constant")


def prepare(run_dir: Path, options: ReproOptions, say: Say = quiet) -> RunContext:
    """Everything the findings of ``run_dir`` share (module doc, step 1)."""
    drill = load_drill_down(run_dir)
    store = RunStore(run_dir)
    graph = _drill_graph(store, drill)
    packed = DrillStore(run_dir).run.load_inputs()
    if not packed or any(v.size != graph.packed_size for v in packed.values()):
        raise UsageError("the drill-down's packed stage inputs are missing or do not fit")
    names = list(drill.population)
    settings = TrialSettings(
        population=tuple(participants_of(store, names)),
        transforms=recorded_transforms(store, names),
        params=with_stored_calibration(store, OracleParams(metrics=())),
        execution=ExecutionSettings(threads=options.threads, parallel=options.parallel,
                                    timeout=options.timeout, max_memory=None).quiet(),
        say=say,
    )  # fmt: skip
    out = options.out or Path(run_dir) / REPRO_FOLDER
    fp64 = _fp64_values(out / "work", graph, packed, settings)
    return RunContext(Path(run_dir), store, drill, graph, packed, fp64, model_ops(store), settings)


def reduce_finding(context: RunContext, symptom: Symptom, work: Path) -> Reduction:
    """The reduction of one finding (its trials under ``work``)."""
    stage = StageCases(context.graph, symptom.stage)
    reducer = Reducer(stage, symptom, context.packed, context.fp64, context.settings, work)
    return reducer.reduce()


def make_reproducers(run_dir: Path, options: ReproOptions, say: Say = quiet) -> list[ReproRecord]:
    """Write a reproducer per selected finding (module doc); returns their records.

    Raises:
        UsageError: Not an analysed run with a drill-down, or an unknown ``--finding``.
    """
    drill = load_drill_down(run_dir)
    symptoms = select(drilled_findings(drill), options.finding, drill)
    if not symptoms:
        raise UsageError("the drill-down named no operator for any finding: nothing to reproduce")
    out = options.out or Path(run_dir) / REPRO_FOLDER
    out.mkdir(parents=True, exist_ok=True)
    context = prepare(run_dir, options, say)
    records = []
    for number, symptom in enumerate(symptoms, 1):
        say(f"repro {number}/{len(symptoms)}: {symptom.label}, {symptom.op_type} "
            f"{symptom.node} ({symptom.basis} error {symptom.error:.3g})")  # fmt: skip
        folder = out / _safe(symptom.label)
        reduction = reduce_finding(context, symptom, out / "work" / _safe(symptom.label))
        record = write_folder(folder, context, reduction, options, say)
        if options.baseline:
            record = _with_baseline(record, folder, context, reduction, options, say)
        records.append(replace(record, folder=folder.name))
        say(f"repro {symptom.label}: {record.status}"
            + (f" ({record.reason})" if record.reason else "")
            + f"; {record.ops_in_case} of {record.ops_in_model} operators")  # fmt: skip
    earlier = _earlier(out, {r.finding for r in records})
    write_index(out, [*earlier, *records])
    if out.resolve() == (Path(run_dir) / REPRO_FOLDER).resolve():
        _refresh_report(Path(run_dir), say)
    if not options.keep_work:
        shutil.rmtree(out / "work", ignore_errors=True)
    return records


def _earlier(out: Path, replaced: set[str]) -> list[ReproRecord]:
    return [r for r in load_reproducers(out) if r.finding not in replaced]


def status_of(reduction: Reduction) -> str:
    """The status of a reduction before its script ran."""
    return Status.NO_CASE if reduction.case is None else Status.NO_SCRIPT


def _refresh_report(run_dir: Path, say: Say) -> None:
    """Render the run's report again: each drilled finding links to its reproducer."""
    store = RunStore(run_dir)
    path = write_report(run_dir, Summary.from_dict(store.read_summary()))
    say(f"repro: report {path} links the reproducers")


def _with_baseline(
    record: ReproRecord,
    folder: Path,
    context: RunContext,
    reduction: Reduction,
    options: ReproOptions,
    say: Say,
) -> ReproRecord:
    """``record`` with the stage cut's own verification (``options.baseline``)."""
    tried = reduction.stage_case
    if tried is None or not tried.check.reproduces:
        return record
    stage = replace(reduction, case=tried.case, check=tried.check, trial=reduction.stage_trial,
                    index=reduction.stage_index, minimal=tried.case.size <= 1)  # fmt: skip
    alone = write_folder(folder.with_name(folder.name + ".stage"), context, stage,
                         replace(options, bisect=False), say)  # fmt: skip
    baseline = {**record.stage_baseline, "status": alone.status,
                "standalone_reason": alone.reason,
                "folder_bytes": alone.folder_bytes, "case_nodes": alone.case_nodes}  # fmt: skip
    return replace(record, stage_baseline=baseline)
