"""The run's model export step: the anchored ONNX export, as a job of the run store.

A zoo model's export is cached (and remembered per request, :func:`export_memo`); a user's
ONNX file or torch module is exported into the run directory. The job runs in its own
process (:mod:`anpred.pipeline.prepare`), so that torch's import stays out of this one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from anpred.cache import cache_dir, file_digest
from anpred.errors import JobFailedError, UsageError
from anpred.execution.pool import run_job, worker_env
from anpred.inputs.several import describe_packing
from anpred.inputs.tensors import image_side
from anpred.interchange.export import AnchoredExport
from anpred.interchange.user_module import is_module_source, is_onnx_path, resolved_source
from anpred.progress import Say
from anpred.settings import DEFAULT_EXPORT_TIMEOUT, RunOptions
from anpred.store import ParticipantStore, RunStore, Status
from anpred.store.files import write_json

#: Module that runs the export job (``python -m anpred.pipeline.prepare JOB``).
EXPORT_MODULE = "anpred.pipeline.prepare"


def export_model(
    options: RunOptions,
    run_dir: Path,
    say: Say,
    timeout: float = DEFAULT_EXPORT_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> AnchoredExport:
    """The anchored export: cached zoo export (torch worker) or the user's ONNX file.

    It runs as a job of the run store (:func:`run_export`); a finished export is read back.

    Args:
        options: The run's settings.
        run_dir: The run directory.
        say: Progress printer.
        timeout: Seconds the export job may take.
        env: Extra environment variables of the export job.

    Raises:
        UsageError: The user's input cannot be exported (unknown anchor, bad weights, ...).
        JobFailedError: The export crashed, failed or timed out.
    """
    store = RunStore(run_dir)
    if store.has_export():  # a resumed run: its export, and the inputs line again
        _say_packing(store, say)
        return AnchoredExport.from_dict(store.read_export())
    request: dict[str, Any] = {"anchors": list(options.anchors)}
    if is_onnx_path(options.model):
        request.update(
            {
                "onnx": str(Path(options.model).resolve()),
                "folder": str(store.model_dir.resolve()),
                "input_shapes": list(options.input_shapes),
                "image_size": image_side(options.preprocess, options.input_size),
                "folding_record": str(store.folding_path.resolve()),
                "packing_record": str(store.packing_path.resolve()),
                "stages": options.stages,
                "granularity": options.granularity,
            }
        )
    elif is_module_source(options.model):
        say(f"export {options.model} to ONNX with {options.granularity} anchors")
        request.update(
            {
                "module": resolved_source(options.model),
                "folder": str(store.model_dir.resolve()),
                "granularity": options.granularity,
                "seed": options.seed,
                "input_shapes": list(options.input_shapes),
                "packing_record": str(store.packing_path.resolve()),
                "folding_record": str(store.folding_path.resolve()),
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
    memo = export_memo(request)
    export = read_export_memo(memo)
    if export is None:
        export = run_export(request, store.export_job, options.model, timeout, env)
        if memo is not None:
            write_json(memo, export.to_dict())
    store.write_export(export.to_dict())
    _say_packing(store, say)
    return export


def _say_packing(store: RunStore, say: Say) -> None:
    """Print how a model's several inputs are packed (nothing for a model with one input)."""
    if store.has_packing():
        say(f"inputs: {describe_packing(store.read_packing())}")


def export_memo(request: Mapping[str, Any]) -> Path | None:
    """Where the export of a zoo model ``request`` is remembered (``None``: a user's ONNX).

    A cached zoo export still cost its job a process, torch's import, two builds of the
    model and two forward passes to plan the anchors before the export cache could be
    looked up: 8.3 CPU seconds for yolov8n, 9 % of ``anpred run``'s wall time (8 inputs,
    six libraries, benchmarks/bench_run.py). The memo maps the request to the export it
    gave, keyed by the request, the weights file's digest, the code that plans and exports
    (``anpred.zoo``, ``anpred.interchange``) and the versions of the libraries it uses, so
    that a change of any of them exports again.
    """
    weights = request.get("weights")
    if "model" not in request or (weights and not Path(weights).is_file()):
        return None  # a user's ONNX; a missing checkpoint: the job says what is wrong
    import hashlib
    import importlib.metadata

    import anpred.interchange
    import anpred.zoo

    digest = hashlib.sha256(json.dumps(dict(request), sort_keys=True).encode())
    if weights:
        digest.update(file_digest(weights, 64).encode())
    for package in (anpred.zoo, anpred.interchange):
        for source in sorted(Path(package.__file__).parent.rglob("*.py")):
            digest.update(source.read_bytes())
    for dist in ("torch", "torchvision", "ultralytics", "onnx"):
        try:
            digest.update(f"{dist}={importlib.metadata.version(dist)}".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{dist}=-".encode())
    return cache_dir("exports", "requests") / f"{digest.hexdigest()[:24]}.json"


def read_export_memo(memo: Path | None) -> AnchoredExport | None:
    """The export ``memo`` remembers, if its files are still in the export cache."""
    if memo is None or not memo.is_file():
        return None
    try:
        export = AnchoredExport.from_dict(json.loads(memo.read_text()))
    except (OSError, ValueError, KeyError, TypeError):  # damaged: export again
        return None
    if not (export.anchored_path.is_file() and export.plain_path.is_file()):
        return None
    return export


def run_export(
    request: Mapping[str, Any],
    folder: ParticipantStore,
    label: str,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> AnchoredExport:
    """Run one export job (:mod:`anpred.pipeline.prepare`) in ``folder``; return its export.

    The job's process is killed after ``timeout`` seconds; its final state (``ok``,
    ``timeout``, ``crash``, ``error``), step and message are recorded in its status.

    Args:
        request: What to export (a zoo model, or a user's ONNX file and a folder).
        folder: The job's folder.
        label: The model, as error messages name it.
        timeout: Seconds the job may take.
        env: Extra environment variables of the job (e.g. its memory limit).

    Raises:
        UsageError: The user's input cannot be exported.
        JobFailedError: The export crashed, failed or timed out.
    """
    result = run_job(
        folder, {**request, "out": str(folder.folder)}, EXPORT_MODULE, timeout, worker_env(2, env)
    )
    if result.status == Status.OK:
        return AnchoredExport.from_dict(result.record["export"])
    folder.write_status(
        {**result.record, "state": result.status, "step": result.step, "message": result.message}
    )
    if result.usage_error:
        raise UsageError(result.message)
    if result.status == Status.TIMEOUT:
        raise JobFailedError(
            f"export of {label} timed out after {timeout:g} s in step {result.step} "
            f"(log: {folder.log_path})"
        )
    reason = (result.message.strip().splitlines() or ["no message"])[-1][:300]
    raise JobFailedError(
        f"export of {label} failed ({result.status} in step {result.step}): {reason} "
        f"(log: {folder.log_path})"
    )
