"""Turn a run directory's captures into results: findings, localization, characterization,
baselines; write ``deviations.parquet`` and return the ``summary.json`` content.

The layout of the run directory and ``summary.json`` is documented in
``docs/run-directory.md``.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from anpred.analysis.oracle import OracleParams, judge_anchor
from anpred.analysis.verdict import Verdict
from anpred.execution.layout import participant_dir, read_json
from anpred.localization.concentration import stage_concentration
from anpred.localization.emergence import (
    collect_findings,
    emergence_distribution,
    emergences,
    library_blame,
)
from anpred.localization.masking import masking_case, summarize_masking
from anpred.localization.propagation import propagation_profile
from anpred.participants import REFERENCE32, REFERENCE64
from anpred.pipeline.evidence import RunEvidence, collect, observer_summary

Say = Callable[[str], None]


def _quiet(_message: str) -> None:
    return None


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


def _participants(run_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    workers = (
        read_json(run_dir / "participants.json") if (run_dir / "participants.json").exists() else {}
    )
    records, names = [], []
    for name, result in workers.items():
        if name == REFERENCE64:
            continue
        status = participant_dir(run_dir, name) / "status.json"
        records.append({**result, "status_detail": read_json(status) if status.exists() else {}})
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
        }
    )
    return row


def _write_parquet(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if rows:
        columns = list(dict.fromkeys(k for r in rows for k in r))
        table = pa.table({c: [r.get(c) for r in rows] for c in columns})
        pq.write_table(table, path)


def _median(values: Sequence[float]) -> float | None:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(values) if values else None


def _localization(
    anchors: list[str],
    verdicts: list[Verdict],
    ev: RunEvidence,
    names: list[str],
    input_ids: list[str],
) -> dict[str, Any]:
    findings = collect_findings((v.participant, v.anchor, v.input_id, v.finding) for v in verdicts)
    for p in names:
        for i in input_ids:
            findings.setdefault((p, i), ())
    dist = emergence_distribution(anchors, findings)
    per_input = {f"{e.participant}|{e.input_id}": e.anchor for e in emergences(anchors, findings)}
    blame = library_blame(anchors, findings)
    result: dict[str, Any] = {"blame": blame.to_dict(), "participants": {}}
    for p in names:
        introduced = {
            a: _median([ev.introduced.get((p, i), {}).get(a) for i in input_ids]) for a in anchors
        }
        known = {a: v for a, v in introduced.items() if v is not None}
        conc = stage_concentration(known).to_dict() if known and sum(known.values()) > 0 else None
        result["participants"][p] = {
            "emergence": {i: per_input.get(f"{p}|{i}") for i in input_ids},
            "emergence_distribution": dist[p].to_dict() if p in dist else None,
            "introduced": introduced,
            "top_stage": conc["ranking"][0]["stage"] if conc else None,
            "concentration": conc,
        }
    return result


def _characterization(
    anchors: list[str],
    verdicts: list[Verdict],
    ev: RunEvidence,
    names: list[str],
    input_ids: list[str],
    baselines: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    by_key = {(v.participant, v.anchor, v.input_id): v for v in verdicts}
    propagation: dict[str, Any] = {}
    cases = []
    for p in names:
        profiles = {}
        for i in input_ids:
            devs = [
                by_key[(p, a, i)].vs_fp64.get("rel_l2") if (p, a, i) in by_key else None
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
                        by_key[(p, a, i)].vs_fp64.get("rel_l2")
                        for i in input_ids
                        if (p, a, i) in by_key
                    ]
                )
                or 0.0
            ),
        )
        dims = [ev.dimension.get((p, worst, i)) for i in input_ids]
        dims = [d for d in dims if d]
        propagation[p] = {
            "profiles": profiles,
            "direction_changes": _median([pr["n_direction_changes"] for pr in profiles.values()]),
            "worst_anchor": worst,
            "dimension_at_worst": {
                "top_channel_share": _median([d.get("top_channel_share") for d in dims]),
                "border_interior_ratio": _median([d.get("border_interior_ratio") for d in dims]),
            },
        }
    return {
        "propagation": propagation,
        "masking": summarize_masking(cases).to_dict(),
        "masking_cases": [c.to_dict() for c in cases if c.masked_by],
    }


def analyse(run_dir: Path, say: Say = _quiet, params: OracleParams | None = None) -> dict[str, Any]:
    """Analyse a run directory (finished or interrupted) and return its summary."""
    params = params or OracleParams()
    run_dir = Path(run_dir)
    options = read_json(run_dir / "run.json")
    export = read_json(run_dir / "model.json")
    input_ids = read_json(run_dir / "inputs.json")["ids"]
    sources = read_json(run_dir / "inputs.json").get("sources", {})
    anchors = [a["key"] for a in export["anchors"]]
    records, names = _participants(run_dir)
    ev = collect(run_dir, names, REFERENCE64, REFERENCE32, anchors, input_ids, params, say)
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
    _write_parquet(run_dir / "deviations.parquet", rows)
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
    summary = {
        "model": {
            "name": options["model"],
            "granularity": options["granularity"],
            "weights": options.get("weights") or f"seeded (seed {options['seed']})",
            "input_shape": export["input_shape"],
            "opset": export["opset"],
        },
        "options": options,
        "inputs": [{"id": i, "source": sources.get(i, "")} for i in input_ids],
        "reference": {"fp64": REFERENCE64, "fp32": REFERENCE32},
        "participants": records,
        "anchors": [
            {k: a[k] for k in ("key", "anchor", "module", "group", "shape")}
            for a in export["anchors"]
        ],
        "pairwise": len(judged_names) == 2,
        "oracle": {
            "primary_metric": params.primary_metric,
            "outlier_k": params.outlier_k,
            "noise_factor": params.noise_factor,
            "mad_floor_rel": params.mad_floor_rel,
        },
        "noise_floor": {
            a: {"median": _median(list(v.values())), "per_input": v} for a, v in noise.items()
        },
        "deviation": {"vs_consensus": heatmap, "vs_fp64": vs64},
        "findings": [
            {
                "participant": v.participant,
                "anchor": v.anchor,
                "input": v.input_id,
                "metrics": v.statistics(),
                "corroborating": list(v.corroborating),
            }
            for v in verdicts
            if v.finding
        ],
        "localization": _localization(anchors, verdicts, ev, judged_names, input_ids),
        "characterization": _characterization(
            anchors, verdicts, ev, judged_names, input_ids, baselines
        ),
        "baselines": {
            b: {
                p: {"passed": e["passed"], "failed_inputs": e["failed_inputs"]}
                for p, e in per.items()
            }
            for b, per in baselines.items()
        },
        "baseline_details": baselines,
        "alignment": ev.alignment,
        "unaligned": ev.unaligned,
    }
    return _clean(summary)


if __name__ == "__main__":
    import json

    print(json.dumps(analyse(Path(sys.argv[1]), say=print), indent=1)[:5000])
