"""The first step of a run: everything decided before a worker starts.

:func:`plan_run` checks the model and the run directory, gathers the participants, exports
the anchored model, sizes the run against the machine (workers at once, memory budget,
disk), prepares the inputs and selects the calibration; it returns a :class:`RunPlan`
whose :class:`~anpred.settings.ExecutionSettings` are resolved (``parallel`` a number,
the memory budget decided, each worker's memory limit in its environment).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

from anpred.calibration.stored import apply_calibration
from anpred.errors import UsageError
from anpred.execution.memory import limit_env
from anpred.execution.resources import (
    check_budget,
    check_disk,
    default_budget,
    estimate_disk,
    estimate_memory,
)
from anpred.execution.slots import describe_auto, resolve, run_need
from anpred.interchange.export import AnchoredExport
from anpred.interchange.user_module import is_onnx_path
from anpred.participants import (
    REFERENCE32,
    Participant,
    ideal_participants,
    parse_participant,
    parse_participants,
)
from anpred.pipeline.chunks import check_chunk, chunked
from anpred.pipeline.model_export import export_model
from anpred.pipeline.model_source import check_model
from anpred.pipeline.prune import check_keep
from anpred.pipeline.run_inputs import count_inputs, prepare_inputs
from anpred.ports.spec import port_participant, port_specs
from anpred.settings import AUTO, DEFAULT_MEMORY, ExecutionSettings, RunOptions
from anpred.store import RunStore


@dataclass(frozen=True)
class RunPlan:
    """A run, ready to execute.

    Attributes:
        options: What the run computes.
        out: The run directory.
        settings: How it executes, resolved (see the module doc).
        participants: Who runs (the fp32 reference first; the fp64 reference is not one).
        export: The anchored export.
        input_ids: The inputs, in order.
    """

    options: RunOptions
    out: Path
    settings: ExecutionSettings
    participants: list[Participant]
    export: AnchoredExport
    input_ids: list[str]

    @property
    def store(self) -> RunStore:
        """The run directory's store."""
        return RunStore(self.out)


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


def run_participants(options: RunOptions) -> list[Participant]:
    """The run's participants: the asked ones (faults applied), the fp32 reference, the
    users' ports and the ideal references of the reduced-precision classes judged
    (:mod:`anpred.library.precision`).
    """
    participants = parse_participants(list(options.libs))
    if options.extra.get("faults"):
        from anpred.inject.participants import EXTRA_KEY, apply_faults

        participants = apply_faults(
            participants, options.extra[EXTRA_KEY], native_torch=not is_onnx_path(options.model)
        )
    if REFERENCE32 not in [p.name for p in participants]:
        participants.insert(0, parse_participant(REFERENCE32))
    participants += [port_participant(s) for s in port_specs(options.extra)]  # users' ports
    return participants + ideal_participants(participants)


def plan_run(options: RunOptions, out: Path, settings: ExecutionSettings) -> RunPlan:
    """Prepare the run (see the module doc); say what it will do.

    Raises:
        UsageError: Bad settings, a model or run directory that cannot be used, a run
            estimated above the memory budget or the free disk.
        JobFailedError: The model export crashed, failed or took over ``export_timeout`` s.
    """
    say = settings.say
    check_keep(settings.keep_captures)
    check_chunk(settings.chunk)
    participants = run_participants(options)
    preprocessing, size = check_model(options)
    resumed = check_out_dir(out, options)
    say(
        f"anpred run {options.model}: {len(participants)} participants + fp64 reference"
        + (" (resuming)" if resumed else "")
    )
    budget = default_budget() if settings.max_memory == DEFAULT_MEMORY else settings.max_memory
    limits = limit_env(budget)
    export = export_model(options, out, say, settings.export_timeout, limits)
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
    threads = settings.threads
    parallel = resolve(settings.parallel, threads, budget, run_need(lambda n: estimate(parallel=n)))
    if settings.parallel == AUTO:
        say(describe_auto(parallel, threads, budget, workers=len(participants) + 1))
    what = f"{options.model} with input {'x'.join(map(str, export.input_shape))}"
    check_budget(estimate(parallel=parallel), budget, what)
    if not resumed:  # a resumed run's captures are on disk already: not counted twice
        at_once = (
            settings.chunk
            if chunked(settings.chunk, n_inputs, settings.keep_captures)
            else n_inputs
        )
        need = estimate_disk(
            export.input_shape, shapes, n_inputs, at_once, len(participants), options.isolation
        )
        check_disk(need, out, what)
    input_ids = prepare_inputs(options, out, export, preprocessing, size)
    say(f"{len(input_ids)} inputs, {len(export.anchors)} anchors")
    if settings.calibration is not None:
        say(apply_calibration(settings.calibration, options, export, participants, out, input_ids))
    resolved = settings.resolved(parallel, budget, limits)
    return RunPlan(options, out, resolved, participants, export, input_ids)
