"""``anpred run``: inputs → export → workers → analysis → results and report.

Every step writes to the run directory as it finishes, so an interrupted run resumes:
``anpred run`` on a directory holding a run with the same settings skips finished work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anpred.errors import UsageError
from anpred.execution.layout import participant_dir, read_json, write_json
from anpred.execution.pool import WorkerResult, run_workers, worker_env
from anpred.interchange.export import AnchoredExport
from anpred.participants import (
    REFERENCE32,
    REFERENCE64,
    Participant,
    parse_participant,
    parse_participants,
)
from anpred.pipeline.options import RunOptions

Say = Callable[[str], None]


@dataclass
class RunOutcome:
    """What ``anpred run`` hands to the CLI."""

    run_dir: Path
    summary: dict[str, Any]
    exit_code: int


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def check_out_dir(out: Path, options: RunOptions) -> bool:
    """Create/validate the run directory; return whether it resumes an earlier run.

    Raises:
        UsageError: Not writable, or it holds a run with other settings.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise UsageError(
            f"output directory {str(out)!r} is not writable ({err.strerror})"
        ) from None
    settings = out / "run.json"
    if settings.exists():
        previous = read_json(settings)
        if previous != options.to_dict():
            raise UsageError(
                f"{str(out)!r} holds a run with other settings; "
                "use another --out, or the same settings to resume it"
            )
        return True
    if any(out.iterdir()):
        raise UsageError(f"{str(out)!r} is not empty and holds no anpred run; use another --out")
    write_json(settings, options.to_dict())
    return False


def is_onnx_path(model: str) -> bool:
    """Whether ``model`` names an ONNX file rather than a zoo model."""
    return model.endswith(".onnx") or os.sep in model


def prepare_inputs(
    options: RunOptions,
    run_dir: Path,
    export: AnchoredExport | None,
    preprocessing: str | None,
    size: int | None,
) -> list[str]:
    """Gather and preprocess the inputs into ``inputs.npz``; return input ids in order."""
    from anpred.inputs.images import gather_images
    from anpred.inputs.preprocess import letterbox, preprocess

    path = run_dir / "inputs.npz"
    meta = run_dir / "inputs.json"
    if path.exists() and meta.exists():
        return read_json(meta)["ids"]
    images = gather_images(
        None if options.image_paths else options.images,
        options.image_paths,
        options.synthetic,
        options.seed,
    )
    arrays: dict[str, np.ndarray] = {}
    for image in images:
        if preprocessing is not None and size is not None:
            arrays[image.id] = preprocess(image, preprocessing, size)
        else:
            assert export is not None
            shape = export.input_shape
            if len(shape) == 4 and shape[1] == 3 and shape[2] == shape[3]:
                arrays[image.id] = letterbox(image.pixels, shape[2])
            else:
                rng = np.random.default_rng([options.seed, len(arrays)])
                arrays[image.id] = rng.standard_normal(shape).astype(np.float32)
    np.savez(path, **arrays)
    write_json(meta, {"ids": list(arrays), "sources": {i.id: i.source for i in images}})
    return list(arrays)


def export_model(options: RunOptions, run_dir: Path, say: Say) -> AnchoredExport:
    """The anchored export: cached zoo export (torch worker) or the user's ONNX file."""
    record = run_dir / "model.json"
    if record.exists():
        return AnchoredExport.from_dict(read_json(record))
    request: dict[str, Any] = {"anchors": list(options.anchors)}
    if is_onnx_path(options.model):
        request.update(
            {
                "onnx": str(Path(options.model).resolve()),
                "folder": str((run_dir / "model").resolve()),
            }
        )
    else:
        say(f"export {options.model} to ONNX with {options.granularity} anchors (cached)")
        request.update(
            {
                "model": options.model,
                "granularity": options.granularity,
                "weights": options.weights,
                "seed": options.seed,
                "input_size": options.input_size,
            }
        )
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(request, handle)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "anpred.pipeline.prepare", handle.name],
            capture_output=True,
            text=True,
            env=worker_env(2),
        )
    finally:
        os.unlink(handle.name)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 2 and lines and lines[-1].startswith("ANPRED-ERROR: "):
        raise UsageError(lines[-1].removeprefix("ANPRED-ERROR: "))
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise UsageError(f"preparing {options.model} failed: {tail[0][:300]}")
    export = AnchoredExport.from_dict(json.loads(lines[-1]))
    write_json(record, export.to_dict())
    return export


def finished_worker(
    run_dir: Path, participant: Participant, n_inputs: int, isolation: bool
) -> WorkerResult | None:
    """The result of a participant that already finished in ``run_dir`` (resume), or ``None``."""
    folder = participant_dir(run_dir, participant.name)
    status = folder / "status.json"
    if not status.exists():
        return None
    data = read_json(status)
    done = len(list(folder.glob("*.capture.json")))
    iso = len(list(folder.glob("*.isolated.json")))
    if (
        data.get("state") not in ("ok", "non-finite")
        or done < n_inputs
        or (isolation and iso < n_inputs)
    ):
        return None
    return WorkerResult(
        participant.name,
        participant.library,
        data["state"],
        "done",
        "",
        data.get("version", ""),
        data.get("settings", {}),
        data.get("timings", {}),
        0,
        done,
    )


def resume_workers(
    run_dir: Path,
    participants: Sequence[Participant],
    job: Mapping[str, Any],
    input_ids: Sequence[str],
    say: Say,
    threads: int,
    parallel: int,
    isolation_source: Path | None,
    timeout: float | None = None,
) -> dict[str, WorkerResult]:
    """Run the participants that have not finished in ``run_dir`` yet; reuse the others."""

    def progress(name: str, message: str) -> None:
        say(f"  [{name}] {message}")

    results: dict[str, WorkerResult] = {}
    todo = []
    for p in participants:
        done = finished_worker(run_dir, p, len(input_ids), isolation_source is not None)
        if done is not None:
            results[p.name] = done
            progress(p.name, "already done (resumed)")
        else:
            todo.append(p)
    if todo:
        results.update(
            run_workers(
                run_dir,
                todo,
                job,
                input_ids,
                threads=threads,
                parallel=parallel,
                isolation_source=isolation_source,
                timeout=timeout,
                progress=progress,
            )
        )
    return results


def model_job(
    export: AnchoredExport, model: str, weights: str | None, seed: int, inputs: Path
) -> dict[str, Any]:
    """The job fields every worker of a run shares: what to run, on which inputs."""
    from anpred.backends.base import ModelJob

    zoo = None if is_onnx_path(model) else model
    return {
        "model": ModelJob(export, zoo, weights, seed).to_dict(),
        "inputs": str(inputs),
    }


def execute(
    options: RunOptions,
    run_dir: Path,
    participants: list[Participant],
    export: AnchoredExport,
    input_ids: list[str],
    say: Say,
    threads: int,
    parallel: int,
    timeout: float | None,
) -> dict[str, WorkerResult]:
    """Run the fp64 reference, then every participant; skip finished ones (resume)."""
    job = model_job(export, options.model, options.weights, options.seed, run_dir / "inputs.npz")
    results: dict[str, WorkerResult] = {}
    reference = parse_participant(REFERENCE64)
    for group, source in (
        ([reference], None),
        (participants, participant_dir(run_dir, REFERENCE64)),
    ):
        results.update(
            resume_workers(
                run_dir,
                group,
                job,
                input_ids,
                say,
                threads,
                parallel,
                source if options.isolation else None,
                timeout,
            )
        )
    order = [REFERENCE64, *(p.name for p in participants)]
    return {name: results[name] for name in order if name in results}


def run(
    options: RunOptions,
    out: Path,
    say: Say = _stderr,
    threads: int = 1,
    parallel: int = 2,
    timeout: float | None = None,
) -> RunOutcome:
    """Run the whole pipeline and return the summary and the exit code.

    Exit codes: 0 no findings, 1 findings, 3 a participant failed (crash/timeout/error).
    """
    started = time.perf_counter()
    participants = parse_participants(list(options.libs))
    if options.extra.get("faults"):
        from anpred.inject.participants import EXTRA_KEY, apply_faults

        participants = apply_faults(
            participants, options.extra[EXTRA_KEY], native_torch=not is_onnx_path(options.model)
        )
    if REFERENCE32 not in [p.name for p in participants]:
        participants.insert(0, parse_participant(REFERENCE32))
    if not is_onnx_path(options.model):
        from anpred.zoo.registry import get_model

        spec = get_model(options.model)
        preprocessing, size = spec.preprocessing, options.input_size or spec.input_size
        if size % 32:
            raise UsageError(f"--input-size must be a multiple of 32, got {size}")
    else:
        from anpred.pipeline.user_onnx import load_onnx

        load_onnx(Path(options.model))
        preprocessing = size = None
    resumed = check_out_dir(out, options)
    say(
        f"anpred run {options.model}: {len(participants)} participants + fp64 reference"
        + (" (resuming)" if resumed else "")
    )
    export = export_model(options, out, say)
    input_ids = prepare_inputs(options, out, export, preprocessing, size)
    say(f"{len(input_ids)} inputs, {len(export.anchors)} anchors")
    results = execute(
        options, out, participants, export, input_ids, say, threads, parallel, timeout
    )
    write_json(out / "participants.json", {k: v.to_dict() for k, v in results.items()})
    from anpred.pipeline.analyse import analyse

    say("analyse: align, consensus, oracle, localization, baselines")
    summary = analyse(out, say=say)
    summary["wall_seconds"] = round(time.perf_counter() - started, 2)
    write_json(out / "summary.json", summary)
    from anpred.report.html import write_report

    write_report(out, summary)
    failed = [r for r in results.values() if r.failed]
    if failed and all(r.usage_error for r in failed):
        # e.g. an op without a translator: the user's input, not a library failure
        raise UsageError(
            f"{failed[0].participant}: {failed[0].message.split(': ', 1)[-1]} "
            f"(results of the others are in {out})"
        )
    findings = bool(summary.get("findings"))
    return RunOutcome(out, summary, 3 if failed else 1 if findings else 0)
