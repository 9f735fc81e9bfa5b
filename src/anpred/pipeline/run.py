"""``anpred run``: inputs → export → workers → analysis → results and report.

Every step writes to the run directory as it finishes, so an interrupted run resumes:
``anpred run`` on a directory holding a run with the same settings skips finished work.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from anpred import fork_server
from anpred.errors import JobFailedError, UsageError
from anpred.execution.executor import Executor, LocalExecutor
from anpred.execution.memory import limit_env
from anpred.execution.pool import (
    DEFAULT_EXPORT_TIMEOUT,
    WorkerResult,
    run_job,
    run_workers,
    worker_env,
)
from anpred.execution.slots import AUTO, Parallel, describe_auto, resolve, run_need
from anpred.execution.worker import OBSERVER_INPUTS, OBSERVER_KEY
from anpred.interchange.export import AnchoredExport
from anpred.interchange.user_module import (
    check_module_source,
    example_ranges,
    is_module_source,
    resolved_source,
)
from anpred.library.descriptor import Loads
from anpred.participants import (
    REFERENCE32,
    REFERENCE64,
    Participant,
    ideal_participants,
    parse_participant,
    parse_participants,
)
from anpred.pipeline.budget import (
    check_budget,
    check_disk,
    default_budget,
    estimate_disk,
    estimate_memory,
)
from anpred.pipeline.chunks import DEFAULT_CHUNK, check_chunk, chunked
from anpred.pipeline.options import RunOptions
from anpred.pipeline.prune import KEEP_NEEDED, check_keep, prune_run
from anpred.ports.spec import port_participant, port_specs
from anpred.progress import Say
from anpred.store import ISOLATED, ParticipantStore, RunStore, Status, Step
from anpred.store.files import PrunedCaptureError
from anpred.store.summary import Summary

if TYPE_CHECKING:
    from anpred.pipeline.early_pass import EarlyPass


@dataclass
class RunOutcome:
    """What ``anpred run`` hands to the CLI."""

    run_dir: Path
    summary: Summary
    exit_code: int


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def check_out_dir(out: Path, options: RunOptions) -> bool:
    """Create/validate the run directory; return whether it resumes an earlier run.

    Raises:
        UsageError: Not writable, or it holds a run with other settings.
    """
    store = RunStore(out)
    store.ensure_writable()
    if store.is_run():
        if RunStore.open(out).read_settings() != options.to_dict():
            raise UsageError(
                f"{str(out)!r} holds a run with other settings; "
                "use another --out, or the same settings to resume it"
            )
        return True
    if not store.is_empty():
        raise UsageError(f"{str(out)!r} is not empty and holds no anpred run; use another --out")
    RunStore.create(out, options.to_dict())
    return False


def is_onnx_path(model: str) -> bool:
    """Whether ``model`` names an ONNX file rather than a zoo model or a torch module."""
    if is_module_source(model):
        return False
    return model.endswith(".onnx") or os.sep in model


def count_inputs(options: RunOptions, export: AnchoredExport) -> int:
    """How many inputs the run will have, before they are prepared (for its memory and
    disk estimates): an ``--inputs`` file's count from its headers, else the images and
    synthetic ones asked for.
    """
    if options.inputs_file:
        from anpred.inputs.tensors import count_npz_inputs

        path = Path(options.inputs_file)
        found = count_npz_inputs(path, export.input_name, export.input_shape)
        if found is not None:
            return found
    return (len(options.image_paths) or options.images) + options.synthetic


def prepare_inputs(
    options: RunOptions,
    run_dir: Path,
    export: AnchoredExport | None,
    preprocessing: str | None,
    size: int | None,
) -> list[str]:
    """Gather and preprocess the inputs into the run store; return input ids in order."""
    from anpred.inputs.images import gather_images
    from anpred.inputs.preprocess import preprocess

    store = RunStore(run_dir)
    if store.has_inputs():
        return store.read_input_ids()
    if export is not None and is_module_source(options.model):  # integers: the example's span
        spans = example_ranges(export.folder, options.input_range, options.input_ranges)
        options = replace(options, input_ranges=(*options.input_ranges, *spans))
    if export is not None and store.has_packing():  # a user model with several inputs
        from anpred.inputs.several import several_inputs

        packed, sources = several_inputs(options, store.read_packing())
        store.write_inputs(packed, sources)
        return list(packed)
    if export is not None and options.inputs_file:
        from anpred.inputs.tensors import npz_inputs

        given, sources = npz_inputs(
            Path(options.inputs_file), export.input_name, export.input_shape, export.input_dtype
        )
        store.write_inputs(given, sources)
        return list(given)
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
            from anpred.inputs.tensors import image_tensor, is_image_shape, random_tensor

            assert export is not None
            shape, dtype = export.input_shape, export.input_dtype
            if is_image_shape(shape):
                arrays[image.id] = image_tensor(
                    image.pixels,
                    shape,
                    options.preprocess,
                    options.mean,
                    options.std,
                    options.bgr,
                    dtype,
                )
            else:  # not an image: seeded tensors of the input's dtype (the image gives the id)
                from anpred.inputs.tensors import input_range_of

                span = input_range_of(
                    export.input_name,
                    [export.input_name],
                    options.input_range,
                    options.input_ranges,
                )
                arrays[image.id] = random_tensor(shape, dtype, options.seed, len(arrays), span)
    store.write_inputs(arrays, {i.id: i.source for i in images})
    return list(arrays)


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
        from anpred.inputs.tensors import image_side

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
            from anpred.store.files import write_json

            write_json(memo, export.to_dict())
    store.write_export(export.to_dict())
    _say_packing(store, say)
    return export


def _say_packing(store: RunStore, say: Say) -> None:
    """Print how a model's several inputs are packed (nothing for a model with one input)."""
    if store.has_packing():
        from anpred.inputs.several import describe_packing

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
    from anpred.cache import cache_dir, file_digest

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


def finished_worker(
    run_dir: Path, participant: Participant, input_ids: Sequence[str], isolation: bool
) -> WorkerResult | None:
    """The result of a participant that already finished ``input_ids`` in ``run_dir``
    (resume), or ``None``.
    """
    folder = RunStore(run_dir).participant(participant.name)
    if not folder.has_status():
        return None
    data = folder.read_status()
    state = Status.parse(data.get("state"))
    n_inputs = len(input_ids)
    done = sum(folder.capture_done(i) for i in input_ids)
    iso = sum(folder.capture_done(i, ISOLATED) for i in input_ids)
    if not state.finished or done < n_inputs or (isolation and iso < n_inputs):
        return None
    return WorkerResult(
        participant.name,
        participant.library,
        state,
        Step.DONE,
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
    env: Mapping[str, str] | None = None,
    executor: Executor | None = None,
    reference: Participant | None = None,
    when_idle: Callable[[], None] | None = None,
    on_tail: Callable[[int], None] | None = None,
) -> dict[str, WorkerResult]:
    """Run the participants that have not finished in ``run_dir`` yet; reuse the others.

    ``env`` holds extra environment variables of every worker (e.g. its memory limit);
    ``executor`` says where they run (default: local processes). ``reference``: the
    participant that writes ``isolation_source`` (the fp64 reference), run with the others
    instead of before them (see :func:`~anpred.execution.pool.run_workers`); it is
    reused when it finished, like any participant. ``when_idle``, ``on_tail``: see
    :func:`~anpred.execution.pool.run_workers`.
    """

    def progress(name: str, message: str) -> None:
        say(f"  [{name}] {message}")

    results: dict[str, WorkerResult] = {}
    todo = []
    if reference is not None:
        done = finished_worker(run_dir, reference, input_ids, False)
        if done is not None:
            results[reference.name] = done
            progress(reference.name, "already done (resumed)")
            reference = None
    for p in participants:
        done = finished_worker(run_dir, p, input_ids, isolation_source is not None)
        if done is not None:
            results[p.name] = done
            progress(p.name, "already done (resumed)")
        else:
            todo.append(p)
    if todo or reference is not None:
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
                env=env,
                executor=executor,
                reference=reference,
                when_idle=when_idle,
                on_tail=on_tail,
            )
        )
    return results


def model_job(
    export: AnchoredExport,
    model: str,
    weights: str | None,
    seed: int,
    inputs: Path,
    transforms: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The job fields every worker of a run shares: what to run, on which inputs, and the
    transforms planned for some participants (see :mod:`anpred.pipeline.transforms`).
    """
    from anpred.backends.base import ModelJob
    from anpred.execution.transform import TRANSFORMS_KEY

    module = model if is_module_source(model) else None
    zoo = None if is_onnx_path(model) or module else model
    job: dict[str, Any] = {
        "model": ModelJob(export, zoo, weights, seed, module).to_dict(),
        "inputs": str(inputs),
    }
    if transforms:
        job[TRANSFORMS_KEY] = {
            name: [dict(r) for r in records] for name, records in transforms.items()
        }
    return job


#: Scheduling weight of a participant by how its library loads the model: a converted
#: artifact (conversion) and a translated graph (translation, tracing, compilation) start
#: slower than a native module, which starts slower than an ONNX file. Measured worker
#: times (yolov8n, 8 inputs, two at a time): jax 16.3 s, tensorflow 16.1, torch 9.2,
#: paddle 8.6, openvino 5.0, onnxruntime 4.0 (benchmarks/bench_run.py).
_WEIGHT = {
    Loads.CONVERTED_ARTIFACT: 3,
    Loads.TRANSLATED_ONNX: 2,
    Loads.NATIVE_MODULE: 1,
    Loads.ONNX_FILE: 0,
}


def heavier_first(participants: Sequence[Participant]) -> list[Participant]:
    """The order to start workers in: the slower libraries first, the user's order among
    equals (longest jobs first leaves the fewest idle slots at the end of a run; the run's
    results keep the user's order). Unknown libraries count as the heaviest.
    """
    from anpred.library import get_library

    def weight(p: Participant) -> int:
        try:
            return _WEIGHT.get(get_library(p.library).loads, 3)
        except UsageError:
            return 3

    return sorted(participants, key=lambda p: -weight(p))


_Group = tuple[list[Participant], Path | None, Participant | None]


def worker_groups(
    reference: Participant,
    scheduled: list[Participant],
    source: Path | None,
    executor: Executor | None,
) -> list[_Group]:
    """The workers' groups, run one after the other: ``(participants, isolation source,
    the reference run in line with them)`` (see :func:`execute`).

    Args:
        reference: The fp64 reference.
        scheduled: The other participants, in the order to start them.
        source: The reference's capture folder when the run isolates stages, else ``None``.
        executor: Where the workers run (``None``: local processes).
    """
    if source is None:  # no isolation: nobody waits for the reference's captures
        return [([reference, *scheduled], None, None)]
    if executor is None or isinstance(executor, LocalExecutor):
        return [(scheduled, source, reference)]  # the reference with the others
    return [([reference], None, None), (scheduled, source, None)]


def _warm_analysis(
    run_dir: Path, participants: list[str], input_ids: list[str], parallel: int
) -> None:
    from anpred.pipeline.collect_pool import warm_fork_server
    from anpred.report.plots import PRELOAD as PLOTTING

    warm_fork_server(run_dir, participants, REFERENCE64, input_ids, parallel, also=PLOTTING)


def early_pass(
    options: RunOptions,
    run_dir: Path,
    participants: Sequence[Participant],
    input_ids: Sequence[str],
    parallel: int,
    executor: Executor | None,
) -> EarlyPass | None:
    """What collects finished inputs in the slots the last workers leave free, set to
    collect them as :func:`~anpred.pipeline.analyse.analyse` will (its participants, anchors
    and oracle parameters); ``None`` where the workers do not write to this file system.
    """
    if executor is not None and not isinstance(executor, LocalExecutor):
        return None
    from anpred.pipeline.early_pass import for_run

    names = [p.name for p in participants]
    return for_run(run_dir, names, input_ids, parallel, options.isolation)


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
    env: Mapping[str, str] | None = None,
    executor: Executor | None = None,
    observer_inputs: Sequence[str] | None = None,
    early: EarlyPass | None = None,
) -> dict[str, WorkerResult]:
    """Run the fp64 reference and every participant; skip finished ones (resume).

    ``observer_inputs``: the inputs whose plain output the workers also compute (the
    observer check); default the first :data:`~anpred.execution.worker.OBSERVER_INPUTS`
    of ``input_ids`` (a chunk of a run passes the run's first ones). ``early``: collects
    finished inputs in the slots the last workers leave free
    (:mod:`anpred.pipeline.early_pass`).

    Where the workers share this file system (local processes), the fp64 reference runs
    first in line with the others, which wait for its captures when they isolate: the
    run does not wait, with ``parallel - 1`` slots idle, for the reference alone. Measured
    (yolov8n, 8 inputs, 6 libraries, ``--parallel 2``): the reference alone took 13 % of
    the run's wall time (benchmarks/bench_run.py). Elsewhere (Ray) it runs before them,
    since a job ships the reference's captures when it starts; without stage isolation
    nobody needs its captures, and it runs in line with the others everywhere (first: it
    is among the longest jobs).
    """
    store = RunStore(run_dir)
    from anpred.machine import describe_machine
    from anpred.pipeline.transforms import plan_transforms

    store.write_machine(describe_machine())

    transforms = plan_transforms(options.extra, export, run_dir)
    job = model_job(
        export, options.model, options.weights, options.seed, store.inputs_path, transforms
    )
    if observer_inputs is not None:
        job[OBSERVER_KEY] = list(observer_inputs)
    results: dict[str, WorkerResult] = {}
    reference = parse_participant(REFERENCE64)
    source = store.participant(REFERENCE64).folder if options.isolation else None
    groups = worker_groups(reference, heavier_first(participants), source, executor)
    # once the last worker has started, the analysis's fork server gets ready beside it
    names = [p.name for p in participants]
    warm = partial(_warm_analysis, run_dir, names, input_ids, parallel)
    for n, (group, isolation_source, concurrent) in enumerate(groups):
        results.update(
            resume_workers(
                run_dir,
                group,
                job,
                input_ids,
                say,
                threads,
                parallel,
                isolation_source,
                timeout,
                env,
                executor,
                reference=concurrent,
                when_idle=warm if n == len(groups) - 1 else None,
                on_tail=early.tick if early is not None and n == len(groups) - 1 else None,
            )
        )
    order = [REFERENCE64, *(p.name for p in participants)]
    return {name: results[name] for name in order if name in results}


def run(
    options: RunOptions,
    out: Path,
    say: Say = _stderr,
    threads: int = 1,
    parallel: Parallel = AUTO,
    timeout: float | None = None,
    export_timeout: float = DEFAULT_EXPORT_TIMEOUT,
    max_memory: int | None | Literal["default"] = "default",
    executor: Executor | None = None,
    drill: bool = True,
    calibration: str | None = None,
    keep_captures: str = "needed",
    chunk: int = DEFAULT_CHUNK,
) -> RunOutcome:
    """Run the whole pipeline and return the summary and the exit code.

    ``parallel``: workers (and analysis processes) at once, or ``"auto"`` (the CPUs this
    process may use, over ``threads``, within the memory budget:
    :mod:`anpred.execution.slots`).
    ``max_memory`` is the memory budget in bytes (``"default"``: 80 % of the memory
    available now; ``None``: no budget). A run estimated above it is refused before
    anything large is allocated, and every worker is stopped, as a recorded crash of its
    participant, when it alone goes over it (:mod:`anpred.pipeline.budget`).
    ``executor`` runs the participants' workers (default: local processes; see
    :mod:`anpred.execution.executor`); the export and the analysis run here.
    ``drill``: when the run has findings, drill from the flagged stages down to operators
    (:mod:`anpred.pipeline.drill`: one more small job per participant).
    ``calibration``: ``--calibration``: ``auto`` (a cached calibration of this model,
    shape, anchors and fp32 participants, else the fixed rule), ``off`` (the fixed rule)
    or a calibration file (:mod:`anpred.pipeline.calibration_cache`); ``None`` keeps what
    the run directory holds (``anpred eval`` attaches its own).
    ``keep_captures``: ``needed`` (default) prunes the captures nothing reads later once the
    run is judged and reported (:mod:`anpred.pipeline.prune`); ``all`` keeps every one.
    ``chunk``: with ``needed``, a run of more inputs than this goes ``chunk`` inputs at a
    time, each chunk run, analysed and pruned before the next (peak disk about one chunk's
    captures; :mod:`anpred.pipeline.chunks`); 0: in one go.

    Exit codes: 0 no findings, 1 findings, 3 a participant failed (crash/timeout/error).

    Raises:
        JobFailedError: The model export crashed, failed or took over ``export_timeout`` s.
    """
    started = time.perf_counter()
    check_keep(keep_captures)
    check_chunk(chunk)
    participants = parse_participants(list(options.libs))
    if options.extra.get("faults"):
        from anpred.inject.participants import EXTRA_KEY, apply_faults

        participants = apply_faults(
            participants, options.extra[EXTRA_KEY], native_torch=not is_onnx_path(options.model)
        )
    if REFERENCE32 not in [p.name for p in participants]:
        participants.insert(0, parse_participant(REFERENCE32))
    participants += [port_participant(s) for s in port_specs(options.extra)]  # users' ports
    # the ideal references of the reduced-precision classes judged (library/precision.py)
    participants += ideal_participants(participants)
    if is_module_source(options.model):
        check_module_source(options.model)
        if options.weights is not None:
            raise UsageError("--weights applies to zoo models: load a checkpoint in your module")
        preprocessing = size = None
    elif not is_onnx_path(options.model):
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
    budget = default_budget() if max_memory == "default" else max_memory
    limits = limit_env(budget)
    export = export_model(options, out, say, export_timeout, limits)
    n_inputs = count_inputs(options, export)
    shapes = [a.shape for a in export.anchors]
    estimate = partial(
        estimate_memory,
        export.input_shape,
        shapes,
        n_inputs,
        len(participants),
        model_bytes=export.anchored_path.stat().st_size if export.anchored_path.exists() else 0,
    )
    auto = parallel == AUTO
    parallel = resolve(parallel, threads, budget, run_need(lambda n: estimate(parallel=n)))
    if auto:
        say(describe_auto(parallel, threads, budget, workers=len(participants) + 1))
    what = f"{options.model} with input {'x'.join(map(str, export.input_shape))}"
    check_budget(estimate(parallel=parallel), budget, what)
    if not resumed:  # a resumed run's captures are on disk already: not counted twice
        at_once = chunk if chunked(chunk, n_inputs, keep_captures) else n_inputs
        need = estimate_disk(
            export.input_shape, shapes, n_inputs, at_once, len(participants), options.isolation
        )
        check_disk(need, out, what)
    input_ids = prepare_inputs(options, out, export, preprocessing, size)
    say(f"{len(input_ids)} inputs, {len(export.anchors)} anchors")
    if calibration is not None:
        from anpred.pipeline.calibrate import apply_calibration

        say(apply_calibration(calibration, options, export, participants, out, input_ids))

    def execute_some(
        ids: list[str], group: list[Participant], early: EarlyPass | None = None
    ) -> dict[str, WorkerResult]:
        return execute(
            options, out, group, export, ids, say, threads, parallel, timeout, limits,
            executor, observer_inputs=input_ids[:OBSERVER_INPUTS], early=early,
        )  # fmt: skip

    early = None
    try:
        if chunked(chunk, len(input_ids), keep_captures):
            from anpred.analysis.oracle import OracleParams
            from anpred.pipeline.calibrate import with_stored_calibration
            from anpred.pipeline.chunks import run_in_chunks

            store = RunStore(out)
            params = with_stored_calibration(store, OracleParams())
            anchors = [a.key for a in export.anchors]
            results = run_in_chunks(
                store, execute_some, participants, input_ids, anchors, chunk, params, say,
                parallel, partial(early_pass, options, out, participants, parallel=parallel,
                                  executor=executor),
            )  # fmt: skip
            order = [REFERENCE64, *(p.name for p in participants)]
            results = {n: results[n] for n in order if n in results}
        else:
            early = early_pass(options, out, participants, input_ids, parallel, executor)
            results = execute_some(input_ids, participants, early)
        RunStore(out).write_participants({k: v.to_dict() for k, v in results.items()})
        from anpred.pipeline.analyse import analyse

        say("analyse: align, consensus, oracle, localization, baselines")
        summary = analyse(out, say=say, processes=parallel, early=early)
        if drill and summary.findings:
            from anpred.analysis.oracle import OracleParams
            from anpred.pipeline.calibrate import with_stored_calibration
            from anpred.pipeline.drill import run_drill

            params = with_stored_calibration(RunStore(out), OracleParams(metrics=()))
            try:
                found = run_drill(
                    out,
                    participants,
                    summary,
                    say,
                    threads,
                    parallel,
                    timeout,
                    limits,
                    executor,
                    params,
                )
            except PrunedCaptureError as err:  # new findings on a pruned run: no stage inputs
                from anpred.store.summary_drill import DrillDown

                found = DrillDown((), reason=str(err))
            summary = replace(summary, drill=found)
        summary = replace(summary, wall_seconds=round(time.perf_counter() - started, 2))
        RunStore(out).write_summary(summary.to_dict())
        from anpred.report.html import write_report

        write_report(out, summary, processes=parallel)
    finally:
        if early is not None:
            early.close()  # interrupted, or the analysis did not take it over
        fork_server.stop()  # the run kept it for its analysis and report
    if keep_captures == KEEP_NEEDED:
        prune_run(out, summary, say)
    failed = [r for r in results.values() if r.failed]
    if failed and all(r.usage_error for r in failed):
        # e.g. an op without a translator: the user's input, not a library failure
        raise UsageError(
            f"{failed[0].participant}: {failed[0].message.split(': ', 1)[-1]} "
            f"(results of the others are in {out})"
        )
    findings = bool(summary.findings)
    return RunOutcome(out, summary, 3 if failed else 1 if findings else 0)
