"""One reproducer folder: the reduced case's files, its script, its verification, its record.

Files (docs/reproducers.md): ``model.onnx`` (the case; inputs ``x0``.., output ``y``),
``inputs.npz`` (each input's values, the run's inputs stacked on a leading axis: the fp64
reference's values rounded to float32), ``expected_fp64.npz`` (``y``: the fp64
reference's output), ``floor.json`` (what a correct implementation of the participant's
precision gives: the fp32 reference, or the ideal reference of its reduced class; and
the threshold the script compares with), ``repro_<library>.py`` and what it needs,
``README.md``, ``repro.json``.
"""

from __future__ import annotations

import io
import statistics
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from anpred.analysis.oracle import CLASS_FACTOR, NOISE_FACTOR
from anpred.inject.onnx_rewrite import rewrite_model
from anpred.inject.plan import PlannedFault
from anpred.inject.transforms import FAULT_KEY, FaultyGraphs, emulates_casts
from anpred.library import get_library
from anpred.library.precision import FP32, ideal_reference
from anpred.machine import describe_machine
from anpred.participants import REFERENCE32, REFERENCE64, precision_of
from anpred.progress import Say
from anpred.repro.bisect import bisect_finding
from anpred.repro.readme import title_of, write_readme
from anpred.repro.scripts import NoScript, script_for
from anpred.repro.subgraph import StageCases, input_names, prefix, standalone_model
from anpred.repro.trial import relative_error
from anpred.repro.verify import verify
from anpred.store.files import write_json
from anpred.store.repro_record import ReproRecord, Status, write_record

if TYPE_CHECKING:
    from anpred.repro.make import ReproOptions, RunContext
    from anpred.repro.reduce import Reduction


def floor_reference(participant: str, population: list[str]) -> tuple[str, float]:
    """Who gives the floor of ``participant``'s precision, and the oracle's factor over it."""
    judged = precision_of(participant).judged_class
    if judged != FP32 and ideal_reference(judged) in population:
        return ideal_reference(judged), CLASS_FACTOR
    return REFERENCE32, NOISE_FACTOR


def _with_fault(model: onnx.ModelProto, context: RunContext, participant: str) -> onnx.ModelProto:
    """``model`` with the participant's injected fault, when the run rewrote its graphs for
    it (:class:`~anpred.inject.transforms.FaultyGraphs`): the reproducer of a faulty
    participant is its faulty graph, run by the stock library. A fault applied by hooks
    inside anpred's translators has no graph form: the model stays clean, and the script
    shows no error (reported as not reproduced).
    """
    library = participant.split("!", 1)[0].split("[", 1)[0]
    for record in context.settings.transforms.get(participant, []):
        if record.get("kind") != FaultyGraphs.kind:
            continue
        fault = PlannedFault.from_record(record[FAULT_KEY])
        present = {n.name for n in model.graph.node}
        nodes = tuple(n for n in fault.nodes if n in present)
        if nodes:
            model = rewrite_model(model, fault.spec, nodes, emulates_casts(library), library)
    return model


def _npz(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def write_case_files(folder: Path, context: RunContext, reduction: Reduction) -> dict[str, Any]:
    """Write model, inputs, expected values and floor; return the floor record."""
    assert reduction.case is not None and reduction.trial is not None
    case, trial = reduction.case, reduction.trial
    stage = StageCases(context.graph, reduction.symptom.stage)
    model = _with_fault(standalone_model(case, stage), context, reduction.symptom.participant)
    onnx.save(model, str(folder / "model.onnx"))
    names = input_names(case)
    used = [i.name for i in model.graph.input]
    key = prefix(reduction.index) + case.target
    feeds: dict[str, list[np.ndarray]] = {n: [] for n in used}
    expected, floors, ids = [], [], []
    reference, factor = floor_reference(reduction.symptom.participant,
                                        [p.name for p in context.settings.population])  # fmt: skip
    for input_id in trial.input_ids:
        exact = trial.capture(REFERENCE64, input_id, key)
        if exact is None:
            continue
        exact = np.asarray(exact, np.float64)
        values = stage.fed_values(case, context.packed[input_id], context.fp64[input_id])
        for tensor, value in values.items():
            if names[tensor] in feeds:
                feeds[names[tensor]].append(value)
        expected.append(exact)
        ids.append(input_id)
        ref = trial.aligned(reference, input_id, key, exact)
        if ref is not None:
            floors.append(relative_error(ref, exact))
    (folder / "inputs.npz").write_bytes(_npz({n: np.stack(v) for n, v in feeds.items()}))
    (folder / "expected_fp64.npz").write_bytes(_npz({"y": np.stack(expected)}))
    floor = statistics.median(floors) if floors else 0.0
    record = {"reference": reference, "floor": floor, "floors": floors, "factor": factor,
              "threshold": factor * floor, "inputs": ids}  # fmt: skip
    write_json(folder / "floor.json", record)
    return record


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def write_folder(folder: Path, context: RunContext, reduction: Reduction,
                 options: ReproOptions, say: Say) -> ReproRecord:  # fmt: skip
    """Write one finding's folder and verify it (module doc)."""
    import shutil

    symptom = reduction.symptom
    participant = next(p for p in context.settings.population if p.name == symptom.participant)
    library = get_library(participant.library)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    stage_tried = reduction.stage_case
    record = ReproRecord(
        finding=symptom.label, participant=symptom.participant, library=participant.library,
        settings=dict(participant.settings), stage=symptom.stage, op=symptom.op,
        node=symptom.node, op_type=symptom.op_type, basis=symptom.basis,
        original_error=symptom.error, status=Status.NO_CASE, folder=folder.name,
        ops_in_stage=reduction.stage_ops, ops_in_model=context.ops_in_model,
        rounds=reduction.rounds, cases_tried=len(reduction.tried),
        stage_baseline={} if stage_tried is None else {
            "ops": reduction.stage_ops, "ops_to_target": stage_tried.case.size,
            "reproduces": stage_tried.check.reproduces,
            "reason": stage_tried.check.reason, "error": stage_tried.check.error},
        versions={"library": library.version(), "converter": library.converter,
                  "converter_version": library.converter_version()},
        machine=describe_machine(),
    )  # fmt: skip
    if reduction.case is None:
        reason = stage_tried.check.reason if stage_tried else "no case was judged"
        record = replace(record, reason=f"no case shows the same symptom, not even the stage "
                         f"alone ({reason})")  # fmt: skip
    else:
        assert reduction.check is not None
        floor = write_case_files(folder, context, reduction)
        record = replace(record, status=Status.NO_SCRIPT, ops_in_case=reduction.case.size,
                         case_nodes=list(reduction.case.nodes),
                         minimal=reduction.minimal, case_error=reduction.check.error,
                         case_ratio=reduction.check.ratio, floor=floor)  # fmt: skip
        model = onnx.load(str(folder / "model.onnx"))
        try:
            script = script_for(participant.library, participant.settings, model,
                                title_of(record))  # fmt: skip
        except NoScript as err:
            record = replace(record, reason=f"no script: {err}")
        else:
            (folder / script.name).write_text(script.text)
            for name, data in script.files.items():
                (folder / name).write_bytes(data)
            if options.bisect:
                found = bisect_finding(context, reduction, floor["threshold"], say)
                record = replace(record, bisect=found)
            if options.verify:
                say(f"repro {symptom.label}: running {script.name} in the {participant.library} "
                    "environment")  # fmt: skip
                checked = verify(folder, participant.library, script.name, script.prepare,
                                 reduction.check.error)  # fmt: skip
                record = replace(
                    record, script=checked.record, reason=checked.reason,
                    status=Status.VERIFIED if checked.reproduces else Status.NOT_REPRODUCED,
                )  # fmt: skip
            else:
                record = replace(record, script={"name": script.name}, reason="not run")
    write_readme(folder, record)
    record = replace(record, folder_bytes=_folder_bytes(folder))
    write_record(folder, record)
    return record
