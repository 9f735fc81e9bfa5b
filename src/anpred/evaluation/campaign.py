"""Run an evaluation grid: one clean run per model, then one faulty participant per fault.

Clean participants are deterministic, so a fault's run reuses the clean run's captures
(linked, not copied) and executes only the faulty participant — one worker per fault
instead of a whole ``anpred run``. The fault's directory is a complete run directory
(``anpred report`` renders it); its analysis is the same ``analyse`` every run gets.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from anpred.errors import AnpredError
from anpred.evaluation.grid import EvalGrid
from anpred.execution.layout import participant_dir, read_json, safe_name, write_json
from anpred.inject.ground_truth import detection
from anpred.inject.participants import EXTRA_KEY, faulty_participant
from anpred.inject.plan import plan_fault
from anpred.inject.spec import FaultSpec
from anpred.interchange.export import AnchoredExport
from anpred.participants import (
    REFERENCE32,
    REFERENCE64,
    Participant,
    parse_participant,
    parse_participants,
)
from anpred.pipeline.analyse import analyse
from anpred.pipeline.options import RunOptions
from anpred.pipeline.run import model_job, resume_workers, run

Say = Callable[[str], None]


@dataclass
class ModelResult:
    """A model's clean summary, one row per injected fault, and its configuration study."""

    model: str
    clean: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    configurations: dict[str, Any] | None = None
    sweep: dict[str, Any] | None = None


def _link(target: Path, link: Path) -> None:
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target.resolve(), link)


def _baseline_detections(
    summary: dict[str, Any], clean: dict[str, Any], faulty: str, library: str
) -> dict[str, bool]:
    """A baseline detects a fault when it fails the faulty participant on an input where
    it passed the clean participant of the same library (the failure is the fault's).
    """
    result = {}
    for name, per in summary.get("baselines", {}).items():
        failed = set(per.get(faulty, {}).get("failed_inputs", []))
        failed_clean = set(
            clean.get("baselines", {}).get(name, {}).get(library, {}).get("failed_inputs", [])
        )
        result[name] = bool(failed - failed_clean)
    return result


def _row(
    summary: dict[str, Any],
    clean: dict[str, Any],
    model: str,
    library: str,
    faulty: str,
    spec: FaultSpec,
    anchors: list[str],
) -> dict[str, Any]:
    det = detection(summary, faulty, spec.stage, anchors)
    mine = summary.get("localization", {}).get("participants", {}).get(faulty, {})
    ranking = [r["stage"] for r in (mine.get("concentration") or {}).get("ranking", [])]
    blame = summary.get("localization", {}).get("blame", {})
    sole = blame.get("sole_counts", {}).get(faulty, 0)
    n_inputs = max(1, blame.get("n_inputs", 1))
    row = {
        "model": model,
        "library": library,
        "participant": faulty,
        "stage": spec.stage,
        "stage_index": anchors.index(spec.stage),
        "kind": spec.kind,
        "op": spec.op,
        "severity": spec.severity,
        "anpred_detected": det["flagged"],
        "anpred_flagged_at_stage": det["flagged_at_stage"],
        "emergence_at_stage": det["emergence_at_stage"] or 0.0,
        "isolation_top1": bool(ranking) and ranking[0] == spec.stage,
        "isolation_top3": spec.stage in ranking[:3],
        "library_blamed": sole / n_inputs >= 0.5,
        "other_flagged": sorted(det["other_participants_flagged"]),
        "output_rel_l2_vs_fp64": summary.get("deviation", {})
        .get("vs_fp64", {})
        .get(faulty, {})
        .get(anchors[-1]),
        "stage_rel_l2_vs_fp64": summary.get("deviation", {})
        .get("vs_fp64", {})
        .get(faulty, {})
        .get(spec.stage),
    }
    for name, detected in _baseline_detections(summary, clean, faulty, library).items():
        row[f"baseline:{name}"] = detected
    return row


def derive_run(
    base: Path,
    out: Path,
    model: str,
    add: list[Participant],
    drop: str | None,
    options: dict[str, Any],
    threads: int,
    parallel: int = 1,
    reanalyse: bool = False,
    say: Say | None = None,
) -> dict[str, Any]:
    """A run directory made from the clean run ``base`` plus participants ``add``.

    The clean run's participants (but ``drop``) are linked, not re-run: they are
    deterministic. Only ``add`` runs, then the whole directory is analysed as any run.
    Resumable: a finished directory is read back (``reanalyse``: judged again from its
    captures, e.g. after changing the oracle).
    """
    summary_path = out / "summary.json"
    if summary_path.exists():
        if not reanalyse:
            return read_json(summary_path)
        summary = analyse(out)
        write_json(summary_path, summary)
        return summary
    export = AnchoredExport.from_dict(read_json(base / "model.json"))
    out.mkdir(parents=True, exist_ok=True)
    for name in ("model.json", "inputs.npz", "inputs.json"):
        _link(base / name, out / name)
    write_json(out / "run.json", options)
    workers = read_json(base / "participants.json")
    for name in workers:
        if name != drop:
            _link(participant_dir(base, name), participant_dir(out, name))
    job = model_job(
        export, model, options.get("weights"), options.get("seed", 0), out / "inputs.npz"
    )
    results = resume_workers(
        out,
        add,
        job,
        read_json(base / "inputs.json")["ids"],
        say or (lambda _m: None),
        threads,
        parallel,
        participant_dir(out, REFERENCE64),
    )
    merged = {k: v for k, v in workers.items() if k != drop}
    merged.update({name: result.to_dict() for name, result in results.items()})
    write_json(out / "participants.json", merged)
    summary = analyse(out)
    write_json(summary_path, summary)
    return summary


def run_fault(
    base: Path,
    fault_dir: Path,
    model: str,
    library: str,
    spec: FaultSpec,
    clean: dict[str, Any],
    say: Say,
    threads: int,
    reanalyse: bool = False,
) -> dict[str, Any] | None:
    """Run one faulty participant against the clean run ``base``; return its row."""
    export = AnchoredExport.from_dict(read_json(base / "model.json"))
    anchors = [a.key for a in export.anchors]
    faulty = faulty_participant(parse_participant(library), spec)
    if not (fault_dir / "summary.json").exists():
        try:
            plan_fault(faulty.settings, export, onnx.load(str(export.anchored_path)))
        except AnpredError as err:
            say(f"  skip {faulty.name}: {err}")
            return None
    options = read_json(base / "run.json")
    options["extra"] = {EXTRA_KEY: {library: spec.to_dict()}}
    summary = derive_run(
        base,
        fault_dir,
        model,
        [faulty],
        parse_participant(library).name,
        options,
        threads,
        reanalyse=reanalyse,
    )
    return _row(summary, clean, model, library, faulty.name, spec, anchors)


def run_configurations(
    base: Path,
    out: Path,
    model: str,
    configurations: Sequence[str],
    threads: int,
    parallel: int,
    reanalyse: bool = False,
    say: Say | None = None,
) -> dict[str, Any]:
    """The real-configuration study of one model: its clean run plus ``configurations``."""
    options = read_json(base / "run.json")
    options["libs"] = [*options["libs"], *configurations]
    participants = parse_participants(list(configurations))
    return derive_run(
        base, out, model, participants, None, options, threads, parallel, reanalyse, say
    )


def evaluate(
    grid: EvalGrid,
    out: Path,
    say: Say,
    threads: int = 1,
    parallel: int = 2,
    reanalyse: bool = False,
) -> list[ModelResult]:
    """Run the whole grid (resumable: finished runs are reused, and judged again from
    their captures with ``reanalyse``; the clean runs are always judged again).
    """
    results = []
    for model in grid.models:
        say(f"== {model}: clean run")
        base = out / safe_name(Path(model).stem) / "clean"
        clean = run(
            RunOptions(
                model=model, libs=(grid.libs,), images=grid.images, granularity=grid.granularity
            ),
            base,
            say=say,
            threads=threads,
            parallel=parallel,
        ).summary
        anchors = [a["key"] for a in clean["anchors"]]
        stages = anchors[:-1] if grid.stages == "all" else list(grid.stages)
        result = ModelResult(model, clean)
        faults = [
            (
                lib,
                FaultSpec.from_dict(
                    {"stage": stage, "op": axis.op, "kind": axis.kind, "severity": severity}
                ),
            )
            for lib in grid.faulty
            for axis in grid.faults
            for severity in axis.severities
            for stage in stages
        ]
        for index, (lib, spec) in enumerate(faults, 1):
            if lib == REFERENCE32:
                continue
            name = safe_name(f"{lib}!{spec.label}-s{spec.severity}-{spec.op.replace('*', 'all')}")
            say(
                f"== {model}: fault {index}/{len(faults)}: {lib} {spec.label} "
                f"op={spec.op} severity={spec.severity}"
            )
            row = run_fault(
                base,
                base.parent / "faults" / name,
                model,
                lib,
                spec,
                clean,
                say,
                threads,
                reanalyse,
            )
            if row is not None:
                result.rows.append(row)
        if grid.configurations:
            say(f"== {model}: configurations {','.join(grid.configurations)}")
            result.configurations = run_configurations(
                base,
                base.parent / "configurations",
                model,
                grid.configurations,
                threads,
                parallel,
                reanalyse,
                say,
            )
        if grid.sizes:
            from anpred.pipeline.sweep import sweep

            say(f"== {model}: input sizes {','.join(map(str, grid.sizes))}")
            result.sweep = sweep(
                RunOptions(
                    model=model, libs=(grid.libs,), images=grid.images, granularity=grid.granularity
                ),
                grid.sizes,
                base.parent / "sweep",
                say,
                threads=threads,
                parallel=parallel,
            )
        results.append(result)
    return results
