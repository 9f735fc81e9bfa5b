"""Turn a run directory's captures into results: findings, localization, characterization,
baselines; write the deviations table and return the typed
:class:`~anpred.store.summary.Summary`.

The layout of the run directory and of the summary is documented in
``docs/run-directory.md``; :mod:`anpred.store` reads and writes it.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anpred.analysis.oracle import AnchorEvidence, OracleParams, judge_anchor
from anpred.analysis.verdict import Verdict
from anpred.calibration.stored import with_stored_calibration
from anpred.errors import UsageError
from anpred.library.precision import FP32, ideal_class, ideal_reference
from anpred.localization.concentration import stage_concentration
from anpred.localization.emergence import (
    collect_findings,
    emergence_distribution,
    emergences,
    library_blame,
)
from anpred.localization.masking import masking_case, summarize_masking
from anpred.localization.propagation import propagation_profile
from anpred.participants import REFERENCE32, REFERENCE64, precision_of
from anpred.pipeline.drill import load_drill
from anpred.pipeline.evidence import RunEvidence, observer_summary
from anpred.pipeline.identical import (
    compare_releases,
    mark_releases,
    release_groups,
    stage_operators,
)
from anpred.progress import Say, quiet
from anpred.store import RunStore
from anpred.store.summary import (
    Anchor,
    BaselineVerdict,
    Blame,
    Characterization,
    Deviation,
    Finding,
    InputRecord,
    Localization,
    ModelInfo,
    NoiseFloor,
    OracleSettings,
    ParticipantLocalization,
    ParticipantRecord,
    Propagation,
    Summary,
)

if TYPE_CHECKING:
    from anpred.pipeline.early_pass import EarlyPass


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf → None, numpy scalars → Python."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def weights_label(options: Mapping[str, Any]) -> str:
    """Where the model's weights came from, as the terminal, report and ground truth say it."""
    from anpred.interchange.user_module import is_module_source, is_onnx_path

    if options.get("weights"):
        return str(options["weights"])
    if is_onnx_path(str(options["model"])):
        return "from the ONNX file"
    if is_module_source(str(options["model"])):
        return f"the module's own (torch seeded {options['seed']} while building it)"
    return f"seeded (seed {options['seed']})"


def participants_of(store: RunStore) -> tuple[list[dict[str, Any]], list[str]]:
    """The judged participants' records (with their status detail) and names, in the
    store's order: every participant but the fp64 reference.
    """
    records, names = [], []
    for name, result in store.read_participants().items():
        if name == REFERENCE64:
            continue
        records.append({**result, "status_detail": store.participant(name).read_status()})
        names.append(name)
    return records, names


def _baselines(ev: RunEvidence) -> dict[str, dict[str, dict[str, Any]]]:
    """Output-level verdicts per baseline and participant, over all inputs."""
    result: dict[str, dict[str, dict[str, Any]]] = {}
    for input_id, judged in ev.baselines.items():
        for method, verdicts in judged.items():
            for participant, stats in verdicts.items():
                entry = result.setdefault(method, {}).setdefault(
                    participant, {"passed": True, "failed_inputs": [], "per_input": {}}
                )
                entry["per_input"][input_id] = stats
                if not stats.get("passed", True):
                    entry["passed"] = False
                    entry["failed_inputs"].append(input_id)
    return result


def _verdict_row(v: Verdict, introduced: float | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "participant": v.participant,
        "anchor": v.anchor,
        "input": v.input_id,
        "finding": v.finding,
    }
    row[v.primary.metric] = v.primary.value
    row.update({name: j.value for name, j in v.secondary.items()})
    row.update({f"{k}_vs_fp64": val for k, val in v.vs_fp64.items()})
    row.update(
        {
            "threshold": v.primary.threshold,
            "noise_floor": v.primary.noise_floor,
            "population_median": v.primary.population_median,
            "introduced": introduced,
            "pairwise": v.pairwise,
            "non_finite": v.non_finite,
            "precision": v.precision,
            "introduced_floor": v.introduced.noise_floor if v.introduced else None,
        }
    )
    return row


def _precision(
    names: Sequence[str], evidence: Mapping[str, list[AnchorEvidence]], params: OracleParams
) -> dict[str, Any]:
    """Each participant's declared precision and each class's members, ideal reference,
    factor and floor per anchor (median over inputs of the primary metric).
    """
    judged = [n for n in names if ideal_class(n) is None]
    declared = {n: precision_of(n) for n in judged}
    classes: dict[str, Any] = {}
    metric = params.primary_metric
    for cls in dict.fromkeys(p.judged_class for p in declared.values()):
        members = [n for n in judged if declared[n].judged_class == cls]
        fp32 = cls == FP32
        floors = {
            a: _median(
                [
                    (e.noise_floor if fp32 else e.class_floors.get(cls, {})).get(metric, math.nan)
                    for e in per
                ]
            )
            for a, per in evidence.items()
        }
        classes[cls] = {
            "members": members,
            "reference": REFERENCE32 if fp32 else ideal_reference(cls),
            "factor": params.noise_factor if fp32 else params.class_factor,
            "floor": _clean(floors),
        }
    return {"participants": {n: p.to_dict() for n, p in declared.items()}, "classes": classes}


def _median(values: Sequence[float]) -> float | None:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(values) if values else None


def _localization(
    anchors: list[str],
    verdicts: list[Verdict],
    ev: RunEvidence,
    names: list[str],
    input_ids: list[str],
) -> Localization:
    findings = collect_findings((v.participant, v.anchor, v.input_id, v.finding) for v in verdicts)
    for p in names:
        for i in input_ids:
            findings.setdefault((p, i), ())
    dist = emergence_distribution(anchors, findings)
    per_input = {f"{e.participant}|{e.input_id}": e.anchor for e in emergences(anchors, findings)}
    blame = _clean(library_blame(anchors, findings).to_dict())
    participants = {}
    for p in names:
        introduced = {
            a: _median([ev.introduced.get((p, i), {}).get(a) for i in input_ids]) for a in anchors
        }
        known = {a: v for a, v in introduced.items() if v is not None}
        conc = stage_concentration(known).to_dict() if known and sum(known.values()) > 0 else None
        participants[p] = ParticipantLocalization(
            emergence={i: per_input.get(f"{p}|{i}") for i in input_ids},
            emergence_distribution=_clean(dist[p].to_dict()) if p in dist else None,
            introduced=_clean(introduced),
            top_stage=conc["ranking"][0]["stage"] if conc else None,
            concentration=_clean(conc),
        )
    return Localization(
        Blame(
            participants=tuple(blame["participants"]),
            counts=blame["counts"],
            sole_counts=blame["sole_counts"],
            anchor_counts=blame["anchor_counts"],
            n_inputs=blame["n_inputs"],
            n_clean=blame["n_clean"],
            n_joint=blame["n_joint"],
            records=blame["records"],
        ),
        participants,
    )


def _characterization(
    anchors: list[str],
    verdicts: list[Verdict],
    ev: RunEvidence,
    names: list[str],
    input_ids: list[str],
    baselines: Mapping[str, Mapping[str, Any]],
    metric: str,
) -> Characterization:
    """Propagation, dimension sensitivity and masking, measured with ``metric`` vs fp64."""
    by_key = {(v.participant, v.anchor, v.input_id): v for v in verdicts}
    propagation: dict[str, Propagation] = {}
    cases = []
    for p in names:
        profiles = {}
        for i in input_ids:
            devs = [
                by_key[(p, a, i)].vs_fp64.get(metric) if (p, a, i) in by_key else None
                for a in anchors
            ]
            if any(d is None or not math.isfinite(d) for d in devs):
                continue
            profiles[i] = propagation_profile(anchors, devs).to_dict()
            flags = {a: by_key[(p, a, i)].finding for a in anchors}
            clean = {
                b: i not in baselines[b].get(p, {}).get("failed_inputs", [i]) for b in baselines
            }
            cases.append(masking_case(p, i, flags, clean))
        worst = max(
            anchors[:-1] or anchors,
            key=lambda a: (
                _median(
                    [
                        by_key[(p, a, i)].vs_fp64.get(metric)
                        for i in input_ids
                        if (p, a, i) in by_key
                    ]
                )
                or 0.0
            ),
        )
        dims = [ev.dimension.get((p, worst, i)) for i in input_ids]
        dims = [d for d in dims if d]
        propagation[p] = Propagation(
            profiles=_clean(profiles),
            direction_changes=_clean(
                _median([pr["n_direction_changes"] for pr in profiles.values()])
            ),
            worst_anchor=worst,
            dimension_at_worst=_clean(
                {
                    "top_channel_share": _median([d.get("top_channel_share") for d in dims]),
                    "border_interior_ratio": _median(
                        [d.get("border_interior_ratio") for d in dims]
                    ),
                }
            ),
        )
    return Characterization(
        propagation=propagation,
        masking=_clean(summarize_masking(cases).to_dict()),
        masking_cases=_clean([c.to_dict() for c in cases if c.masked_by]),
    )


def _gather(
    store: RunStore,
    names: list[str],
    anchors: list[str],
    input_ids: list[str],
    params: OracleParams,
    say: Say,
    processes: int = 1,
    early: EarlyPass | None = None,
) -> tuple[RunEvidence, OracleParams]:
    """The streaming pass over the captures (and its statistics written), or, for a run that
    went in chunks, their statistics merged (:mod:`anpred.pipeline.chunks`), or, when
    captures were pruned (:mod:`anpred.pipeline.prune`), the statistics the run stored.

    Raises:
        UsageError: Captures were pruned and the statistics cannot stand in for them.
    """
    from dataclasses import replace

    from anpred.pipeline import statistics
    from anpred.pipeline.chunks import chunk_statistics
    from anpred.pipeline.collect_pool import collect_inputs
    from anpred.pipeline.evidence import Collection
    from anpred.pipeline.prune import captures_pruned, statistics_note
    from anpred.store.pruning import has_statistics, remove_chunk_statistics

    chunked = chunk_statistics(store, names, anchors, input_ids, params, say)
    if chunked is not None:  # a run that went in chunks: merge their statistics
        ev = chunked[0]
        statistics.save(store, ev, params.metric_names(), names, input_ids)
        remove_chunk_statistics(store)
        return ev, params
    if not captures_pruned(store, [REFERENCE64, *names], input_ids):
        ev = collect_inputs(
            Collection.of(store.root, names, anchors, params), input_ids, say, processes, early
        )
        statistics.save(store, ev, params.metric_names(), names, input_ids)
        return ev, params
    if not has_statistics(store):
        raise UsageError(
            f"{store.root}: its captures were pruned and it has no per-anchor statistics to "
            "judge it from; re-run it with --keep-captures all"
        )
    ev, metrics, covered, inputs = statistics.load(store)
    if covered != names or inputs != input_ids:
        raise UsageError(
            f"{store.root}: its captures were pruned when it had participants {covered} and "
            f"{len(inputs)} inputs; it now has {names} and {len(input_ids)}: re-run it into a "
            "new --out (--keep-captures all keeps what a later change needs)"
        )
    if params.primary_metric not in metrics:
        raise UsageError(
            f"{store.root}: its captures were pruned and its statistics hold no "
            f"{params.primary_metric!r}; re-run it with --keep-captures all"
        )
    missing = [m for m in params.metric_names() if m not in metrics]
    if missing:
        params = replace(params, metrics=tuple(m for m in params.metric_names() if m in metrics))
    say(statistics_note(missing))
    return ev, params


def analyse(
    run_dir: Path,
    say: Say = quiet,
    params: OracleParams | None = None,
    processes: int = 1,
    early: EarlyPass | None = None,
) -> Summary:
    """Analyse a run directory (finished or interrupted): write the deviations table and
    return the typed summary (``summary.to_dict()`` is what the run store writes).
    The streaming pass over the captures uses up to ``processes`` processes
    (:mod:`anpred.pipeline.collect_pool`; the numbers do not depend on it); ``early``: the
    inputs a run began to collect while its last workers ran (:mod:`anpred.pipeline.early_pass`).
    """
    run_dir = Path(run_dir)
    store = RunStore.open(run_dir)
    params = with_stored_calibration(store, params or OracleParams())
    options = store.read_settings()
    export = store.read_export()
    input_ids = store.read_input_ids()
    sources = store.read_input_sources()
    anchors = [a["key"] for a in export["anchors"]]
    records, names = participants_of(store)
    ev, params = _gather(store, names, anchors, input_ids, params, say, processes, early)
    verdicts: list[Verdict] = []
    for anchor in anchors:
        if ev.evidence[anchor]:
            introduced = {key: per[anchor] for key, per in ev.introduced.items() if anchor in per}
            verdicts.extend(
                judge_anchor(
                    ev.evidence[anchor],
                    params,
                    introduced=introduced,
                    introduced_floor={i: v for (p, i), v in introduced.items() if p == REFERENCE32},
                )
            )
    rows = [
        _verdict_row(v, ev.introduced.get((v.participant, v.input_id), {}).get(v.anchor))
        for v in verdicts
    ]
    store.write_deviations(rows)
    baselines = _baselines(ev)
    judged_names = sorted({v.participant for v in verdicts}, key=names.index)
    noise = {
        a: {e.input_id: e.noise_floor.get(params.primary_metric) for e in ev.evidence[a]}
        for a in anchors
    }
    heatmap = {
        p: {
            a: _median([v.primary.value for v in verdicts if v.participant == p and v.anchor == a])
            for a in anchors
        }
        for p in judged_names
    }
    vs64 = {
        p: {
            a: _median(
                [
                    v.vs_fp64.get(params.primary_metric)
                    for v in verdicts
                    if v.participant == p and v.anchor == a
                ]
            )
            for a in anchors
        }
        for p in judged_names
    }
    for record in records:
        record["observer"] = observer_summary(ev.observer.get(record["participant"], {}))
    _compare_releases(store, records, anchors, input_ids, verdicts)
    return Summary(
        model=ModelInfo(
            name=options["model"],
            granularity=options["granularity"],
            weights=weights_label(options),
            input_shape=tuple(export["input_shape"]),
            opset=export["opset"],
            inputs=_packed_inputs(store),
        ),
        options=_clean(options),
        inputs=tuple(InputRecord(i, sources.get(i, "")) for i in input_ids),
        reference={"fp64": REFERENCE64, "fp32": REFERENCE32},
        participants=tuple(ParticipantRecord.from_dict(_clean(r)) for r in records),
        anchors=tuple(
            Anchor(a["key"], a["anchor"], a["module"], a["group"], _shape(a["shape"]))
            for a in export["anchors"]
        ),
        pairwise=len(judged_names) == 2,
        oracle=OracleSettings(
            params.primary_metric,
            params.outlier_k,
            params.noise_factor,
            params.mad_floor_rel,
            params.threshold_rule,
            params.calibration.summary() if params.calibration else None,
        ),
        noise_floor={
            a: NoiseFloor(_clean(_median(list(v.values()))), _clean(v)) for a, v in noise.items()
        },
        deviation=Deviation(_clean(heatmap), _clean(vs64)),
        findings=tuple(
            Finding(
                v.participant,
                v.anchor,
                v.input_id,
                _clean(v.statistics()),
                tuple(v.corroborating),
            )
            for v in verdicts
            if v.finding
        ),
        localization=_localization(anchors, verdicts, ev, judged_names, input_ids),
        characterization=_characterization(
            anchors, verdicts, ev, judged_names, input_ids, baselines, params.primary_metric
        ),
        baselines={
            b: {p: BaselineVerdict(e["passed"], tuple(e["failed_inputs"])) for p, e in per.items()}
            for b, per in baselines.items()
        },
        baseline_details=_clean(baselines),
        alignment=_clean(ev.alignment),
        unaligned=_clean(ev.unaligned),
        machine=store.read_machine(),
        drill=load_drill(run_dir),
        precision=_precision(names, ev.evidence, params),
    )


def _compare_releases(
    store: RunStore,
    records: list[dict[str, Any]],
    anchors: list[str],
    input_ids: list[str],
    verdicts: list[Verdict],
) -> None:
    """Record which library releases gave bit-identical anchors, and where the others first
    differ (:mod:`.identical`).
    """
    from anpred.pipeline.prune import captures_pruned

    groups = release_groups(records)
    if groups:
        members = [n for g in groups for n in g]
        captures = not captures_pruned(store, members, input_ids)
        found = compare_releases(store, groups, anchors, input_ids, verdicts, captures)
        differing = {c.differs_at for c in found if c.differs_at is not None}
        stages = stage_operators(store.read_export(), differing) if differing else {}
        mark_releases(records, found, "captures" if captures else "deviations", stages)


def _packed_inputs(store: RunStore) -> tuple[dict[str, Any], ...]:
    """The model's own inputs (name, dtype, shape) when several are packed, else ()."""
    if not store.has_packing():
        return ()
    return tuple(
        {
            "name": str(t["name"]),
            "dtype": str(t.get("dtype", "float32")),
            "shape": [int(d) for d in t["shape"]],
        }
        for t in store.read_packing()["tensors"]
    )


def _shape(shape: Sequence[int] | None) -> tuple[int, ...] | None:
    return None if shape is None else tuple(int(d) for d in shape)


if __name__ == "__main__":
    import json

    print(json.dumps(analyse(Path(sys.argv[1]), say=print).to_dict(), indent=1)[:5000])
