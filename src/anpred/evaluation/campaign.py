"""Run an evaluation grid: one clean run per model, then one faulty participant per fault.

Clean participants are deterministic, so a fault's run reuses the clean run's captures
(linked, not copied) and executes only the faulty participant — one worker per fault
instead of a whole ``anpred run``. The fault's directory is a complete run directory
(``anpred report`` renders it); its analysis is the same ``analyse`` every run gets.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from anpred.backends.base import ModelJob
from anpred.errors import AnpredError
from anpred.evaluation.grid import EvalGrid
from anpred.execution.layout import participant_dir, read_json, safe_name, write_json
from anpred.execution.pool import run_workers
from anpred.inject.ground_truth import detection
from anpred.inject.participants import EXTRA_KEY, faulty_participant
from anpred.inject.plan import plan_fault
from anpred.inject.spec import FaultSpec
from anpred.interchange.export import AnchoredExport
from anpred.participants import REFERENCE32, REFERENCE64, parse_participant
from anpred.pipeline.analyse import analyse
from anpred.pipeline.options import RunOptions
from anpred.pipeline.run import is_onnx_path, run

Say = Callable[[str], None]


@dataclass
class ModelResult:
    """A model's clean summary and one row per injected fault."""

    model: str
    clean: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)


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


def run_fault(
    base: Path,
    fault_dir: Path,
    model: str,
    library: str,
    spec: FaultSpec,
    clean: dict[str, Any],
    say: Say,
    threads: int,
) -> dict[str, Any] | None:
    """Run one faulty participant against the clean run ``base``; return its row."""
    export = AnchoredExport.from_dict(read_json(base / "model.json"))
    anchors = [a.key for a in export.anchors]
    faulty = faulty_participant(parse_participant(library), spec)
    summary_path = fault_dir / "summary.json"
    if not summary_path.exists():
        try:
            plan_fault(faulty.settings, export, onnx.load(str(export.anchored_path)))
        except AnpredError as err:
            say(f"  skip {faulty.name}: {err}")
            return None
        fault_dir.mkdir(parents=True, exist_ok=True)
        for name in ("model.json", "inputs.npz", "inputs.json"):
            _link(base / name, fault_dir / name)
        options = read_json(base / "run.json")
        options["extra"] = {EXTRA_KEY: {library: spec.to_dict()}}
        write_json(fault_dir / "run.json", options)
        workers = read_json(base / "participants.json")
        clean_name = parse_participant(library).name
        for name in workers:
            if name != clean_name:
                _link(participant_dir(base, name), participant_dir(fault_dir, name))
        input_ids = read_json(base / "inputs.json")["ids"]
        job = {
            "model": ModelJob(export, zoo_model=None if is_onnx_path(model) else model).to_dict(),
            "inputs": str((fault_dir / "inputs.npz").resolve()),
        }
        results = run_workers(
            fault_dir,
            [faulty],
            job,
            input_ids,
            threads=threads,
            isolation_source=participant_dir(fault_dir, REFERENCE64),
        )
        merged = {k: v for k, v in workers.items() if k != clean_name}
        merged[faulty.name] = results[faulty.name].to_dict()
        write_json(fault_dir / "participants.json", merged)
        write_json(summary_path, analyse(fault_dir))
    return _row(read_json(summary_path), clean, model, library, faulty.name, spec, anchors)


def evaluate(
    grid: EvalGrid, out: Path, say: Say, threads: int = 1, parallel: int = 2
) -> list[ModelResult]:
    """Run the whole grid (resumable: finished runs are reused)."""
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
                base, base.parent / "faults" / name, model, lib, spec, clean, say, threads
            )
            if row is not None:
                result.rows.append(row)
        results.append(result)
    return results
