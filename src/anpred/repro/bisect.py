"""Settings bisection: the smallest set of a library's switches that makes the error go away.

Every library descriptor declares the switches its runner reads, with their values
(:attr:`anpred.library.Library.switches`: MNN's ``winograd``, TensorFlow's
``env.TF_ENABLE_ONEDNN_OPTS``, onnxruntime's ``optimization``...). Starting from the flagged
participant's own settings, the bisection runs the reduced case with every single switch
flipped to each of its other values (one trial, every variant a worker of its own), then,
if no single flip removes the error, every pair (at most :data:`MAX_PAIRS`). A variant
*shows the error* when its error at the target operator is beyond the reproducer's
threshold (the floor's, ``floor.json``), as the script judges, **and** within
:data:`~anpred.repro.symptom.SYMPTOM_FACTOR` of the participant's own settings' error: an
error that drops by more than that factor is not the same error any more, even where what
remains is still above the floor (MNN's Winograd error on the light models' long dot
products falls 17x without Winograd, to the single-accumulator error TensorFlow's oneDNN
convolution has there too). The cause is the smallest set of flips whose variant does not
show it: the setting that turns the error on.
"""

from __future__ import annotations

import copy
import itertools
import statistics
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from anpred.inject.transforms import FAULT_KEY
from anpred.library import get_library
from anpred.participants import REFERENCE64, Participant
from anpred.progress import Say
from anpred.repro.subgraph import StageCases, batch_graph, prefix
from anpred.repro.symptom import SYMPTOM_FACTOR
from anpred.repro.trial import relative_error, run_trial

if TYPE_CHECKING:
    from anpred.repro.make import RunContext
    from anpred.repro.reduce import Reduction

#: At most this many pairs of flips in the second round.
MAX_PAIRS = 12
#: Prefix of a switch that is an environment variable of the worker.
ENV_PREFIX = "env."


def _value(settings: Mapping[str, Any], switch: str, default: Any) -> Any:
    if switch.startswith(ENV_PREFIX):
        return dict(settings.get("env") or {}).get(switch[len(ENV_PREFIX) :], default)
    return settings.get(switch, default)


def flipped_settings(settings: Mapping[str, Any], flips: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with each switch of ``flips`` set to its value."""
    out = copy.deepcopy(dict(settings))
    for switch, value in flips.items():
        if switch.startswith(ENV_PREFIX):
            out["env"] = {**dict(out.get("env") or {}), switch[len(ENV_PREFIX) :]: value}
        else:
            out[switch] = value
    return out


def candidate_flips(settings: Mapping[str, Any], switches: Mapping[str, tuple[Any, ...]],
                    size: int) -> list[dict[str, Any]]:  # fmt: skip
    """Every set of ``size`` switches flipped away from their values in ``settings``."""
    other = {
        s: [v for v in values if v != _value(settings, s, values[0])]
        for s, values in switches.items()
    }
    found = []
    for names in itertools.combinations(sorted(other), size):
        for values in itertools.product(*(other[n] for n in names)):
            found.append(dict(zip(names, values, strict=True)))
    return found


def bisect_finding(
    context: RunContext, reduction: Reduction, threshold: float, say: Say
) -> dict[str, Any]:
    """The settings bisection of one reduced finding (module doc); ``repro.json``'s
    ``bisect`` entry.

    Args:
        context: The run's shared state.
        reduction: The finding's reduction (its case and trial).
        threshold: The reproducer's threshold (``floor.json``).
        say: Progress printer.
    """
    symptom = reduction.symptom
    case = reduction.case
    assert case is not None
    participant = next(p for p in context.settings.population if p.name == symptom.participant)
    library = get_library(participant.library)
    record: dict[str, Any] = {"switches": {k: list(v) for k, v in library.switches.items()},
                              "max_size": 2, "trials": [], "runs": 0}  # fmt: skip
    if any(FAULT_KEY in r for r in context.settings.transforms.get(participant.name, [])):
        return {**record, "reason": "an injected fault: no setting of the library causes it"}
    if not library.switches:
        return {**record, "reason": f"{library.name} declares no switches"}
    stage = StageCases(context.graph, symptom.stage)
    batch = batch_graph([case], stage)
    packed = {
        i: batch.pack([stage.fed_values(case, context.packed[i], context.fp64[i])])
        for i in context.packed
    }
    key = prefix(0) + case.target
    floor = threshold
    record["threshold"] = floor
    base = dict(participant.settings)
    assert reduction.trial is not None
    work = reduction.trial.root.parent / "bisect"

    def run(flips: list[dict[str, Any]], number: int) -> list[dict[str, Any]]:
        variants = [
            Participant(
                f"{library.name}~bisect{number}-{i}",
                library.name,
                participant.config,
                flipped_settings(base, f),
            )  # fmt: skip
            for i, f in enumerate(flips)
        ]
        say(f"repro {symptom.label}: bisect round {number}, {len(variants)} setting(s)")
        trial = run_trial(work / f"round{number}", batch, packed, context.settings,
                          participants=variants, judge=False)  # fmt: skip
        rows = []
        for flip, variant in zip(flips, variants, strict=True):
            errors = []
            for input_id in trial.input_ids:
                exact = trial.capture(REFERENCE64, input_id, key)
                got = None if exact is None else trial.aligned(variant.name, input_id, key, exact)
                if got is not None and exact is not None:
                    errors.append(relative_error(got, exact))
            error = statistics.median(errors) if errors else None
            row = {"flipped": flip, "error": error,
                   "shows": None if error is None else error > floor}  # fmt: skip
            if variant.name in trial.failed:
                row["failed"] = trial.failed[variant.name][:200]
            rows.append(row)
        record["runs"] += len(variants)
        return rows

    first = run([{}, *candidate_flips(base, library.switches, 1)], 1)
    record["trials"] = first
    if not first[0]["shows"]:
        return {**record, "reason": "the participant's own settings do not show the error here"}
    own = first[0]["error"]
    record["own_error"] = own
    for row in first:
        _same_error(row, own)
    gone = [r for r in first[1:] if r["shows"] is False]
    if not gone:
        pairs = candidate_flips(base, library.switches, 2)[:MAX_PAIRS]
        if pairs:
            second = run(pairs, 2)
            for row in second:
                _same_error(row, own)
            record["trials"] = first + second
            gone = [r for r in second if r["shows"] is False]
    if not gone:
        return {**record, "reason": "no flip of at most two switches removes the error"}
    best = min(gone, key=lambda r: (len(r["flipped"]), r["error"]))
    record["cause"] = {
        s: {"from": _value(base, s, library.switches[s][0]), "to": v}
        for s, v in best["flipped"].items()
    }
    record["alternatives"] = [r["flipped"] for r in gone if r is not best]
    return record


def _same_error(row: dict[str, Any], own: float) -> None:
    """Mark ``row`` as not showing the error when its error fell by more than the symptom
    factor from ``own`` (the module doc); ``remains`` says whether what is left is still
    above the threshold.
    """
    error = row["error"]
    if error is None or not row["shows"]:
        return
    if error < own / SYMPTOM_FACTOR:
        row["shows"] = False
        row["remains_above_threshold"] = True
