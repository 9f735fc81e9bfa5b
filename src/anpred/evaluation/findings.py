"""The paper's three findings as data, per model and library, from the campaign's records.

Written into the results folder next to ``eval.md`` (:func:`write_findings`), from the clean
runs' and size sweeps' summaries alone:

- **stage concentration** (``stages.csv``): per model, library and stage, the error the
  stage introduces by itself (stage isolation) and its share of the library's total; the
  Gini coefficient over stages;
- **dimension sensitivity** (``dimension.csv``, ``sizes.csv``): at each library's worst
  anchor, the share of the error in the top 5 % of channels and the border/interior ratio
  of the spatial error; per anchor and input size, the distance from fp64 and its log-log
  slope (``anpred sweep``);
- **non-monotonic propagation** (``propagation.csv``): per step between consecutive anchors
  the gain of the distance from fp64 (median over inputs) and its direction (amplified,
  attenuated, flat: :data:`~anpred.localization.propagation.DEFAULT_LOG_GAIN_TOLERANCE`).

``clean.csv`` and ``configurations.csv`` hold the clean runs' false findings per library
and the configuration study, one row each. ``findings.md`` holds the three tables and the
plots ``plots/concentration.png``, ``plots/propagation.png``, ``plots/sizes.png``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anpred.evaluation.results import ModelResult, _csv_text, _write_text
from anpred.library.precision import ideal_class
from anpred.participants import REFERENCE32, REFERENCE64
from anpred.store.summary import Summary

FINDINGS = "findings.md"


def _name(model: str) -> str:
    return Path(model).stem if model.endswith(".onnx") else model


def _libraries(s: Summary) -> list[str]:
    """The judged libraries of a clean run (no fp64 reference, no ideal reference)."""
    return [
        p.participant
        for p in s.participants
        if p.participant != REFERENCE64 and ideal_class(p.participant) is None
    ]


def _participants(res: ModelResult) -> list[tuple[Summary, str]]:
    """The libraries of the clean run, then the configurations of the study (each with the
    summary that judged it).
    """
    pairs = [(res.clean, p) for p in _libraries(res.clean)]
    if res.configurations is not None:
        clean = set(_libraries(res.clean))
        pairs += [(res.configurations, p) for p in _libraries(res.configurations) if p not in clean]
    return pairs


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(known) if known else None


def stage_rows(results: Sequence[ModelResult]) -> list[dict[str, Any]]:
    """``stages.csv``: introduced error and share per (model, library, stage)."""
    rows = []
    for res in results:
        for summary, p in _participants(res):
            loc = summary.localization.participants.get(p)
            if loc is None or not loc.introduced:
                continue
            known = {s: v for s, v in loc.introduced.items() if v is not None}
            total = sum(known.values())
            ranked = sorted(known, key=lambda s: -known[s])
            for index, (stage, value) in enumerate(loc.introduced.items()):
                rows.append(
                    {
                        "model": _name(res.model),
                        "library": p,
                        "stage": stage,
                        "stage_index": index,
                        "introduced": value,
                        "share": value / total if value is not None and total else None,
                        "rank": ranked.index(stage) + 1 if stage in known else None,
                    }
                )
    return rows


def propagation_rows(results: Sequence[ModelResult]) -> list[dict[str, Any]]:
    """``propagation.csv``: per (model, library, step), the median gain over the inputs of
    the distance from fp64 and its direction.
    """
    rows = []
    for res in results:
        for summary, p in _participants(res):
            prop = summary.characterization.propagation.get(p)
            profiles = list(prop.profiles.values()) if prop else []
            if not profiles:
                continue
            anchors = profiles[0]["anchors"]
            tolerance = profiles[0]["log_gain_tolerance"]
            for step in range(len(anchors) - 1):
                gain = _median([pr["gains"][step] for pr in profiles])
                log = math.log(gain) if gain else 0.0
                rows.append(
                    {
                        "model": _name(res.model),
                        "library": p,
                        "step": step + 1,
                        "source": anchors[step],
                        "target": anchors[step + 1],
                        "deviation_source": _median([pr["deviations"][step] for pr in profiles]),
                        "deviation_target": _median(
                            [pr["deviations"][step + 1] for pr in profiles]
                        ),
                        "gain": gain,
                        "direction": 0 if abs(log) <= tolerance else (1 if log > 0 else -1),
                    }
                )
    return rows


def dimension_rows(results: Sequence[ModelResult]) -> list[dict[str, Any]]:
    """``dimension.csv``: channel and spatial concentration at each library's worst anchor."""
    rows = []
    for res in results:
        for summary, p in _participants(res):
            prop = summary.characterization.propagation.get(p)
            if prop is None:
                continue
            dim = prop.dimension_at_worst or {}
            rows.append(
                {
                    "model": _name(res.model),
                    "library": p,
                    "worst_anchor": prop.worst_anchor,
                    "top_channel_share": dim.get("top_channel_share"),
                    "border_interior_ratio": dim.get("border_interior_ratio"),
                }
            )
    return rows


def size_rows(results: Sequence[ModelResult]) -> list[dict[str, Any]]:
    """``sizes.csv``: distance from fp64 per (model, library, anchor, input size)."""
    rows = []
    for res in results:
        if not res.sweep:
            continue
        sizes = res.sweep["sizes"]
        for p, data in res.sweep["participants"].items():
            if p == REFERENCE64:
                continue
            for anchor, errors in data["errors"].items():
                fit = data["fits"].get(anchor, {})
                for size, error in zip(sizes, errors, strict=True):
                    rows.append(
                        {
                            "model": _name(res.model),
                            "library": p,
                            "anchor": anchor,
                            "size": size,
                            "rel_l2_vs_fp64": error,
                            "slope": fit.get("slope"),
                            "trend": fit.get("trend"),
                        }
                    )
    return rows


def clean_rows(results: Sequence[ModelResult]) -> list[dict[str, Any]]:
    """``clean.csv``: per (model, library) of the clean run, anpred's false findings over its
    (anchor, input) cells and each output-level baseline's failed inputs.
    """
    rows = []
    for res in results:
        s = res.clean
        judged = {p.participant for p in s.participants if p.judged}
        output = s.anchor_keys[-1] if s.anchors else None
        for p in _libraries(s):
            loc = s.localization.participants.get(p)
            conc = (loc.concentration if loc else None) or {}
            row: dict[str, Any] = {
                "model": _name(res.model),
                "library": p,
                "judged": p in judged,
                "inputs": len(s.inputs),
                "cells": len(s.inputs) * len(s.anchors) if p in judged else 0,
                "anpred_findings": len(s.findings_of(p)),
                "output_rel_l2_vs_fp64": s.deviation.vs_fp64.get(p, {}).get(output),
                "top_introduced_stage": loc.top_stage if loc else None,
                "gini": conc.get("gini"),
            }
            for name in s.baselines:
                row[f"baseline:{name}"] = (
                    len(s.failed_inputs(name, p)) if p != REFERENCE32 else None
                )
            rows.append(row)
    return rows


def configuration_rows(results: Sequence[ModelResult]) -> list[dict[str, Any]]:
    """``configurations.csv``: per (model, configuration) of the study, its findings, where
    they emerge, its output's distance from fp64 and the baselines that fail it.
    """
    rows = []
    for res in results:
        s = res.configurations
        if s is None:
            continue
        clean = {r.participant for r in res.clean.participants}
        output = s.anchor_keys[-1]
        for p in _libraries(s):
            if p in clean:
                continue
            loc = s.localization.participants.get(p)
            dist = (loc.emergence_distribution if loc else None) or {}
            findings = len(s.findings_of(p))
            rows.append(
                {
                    "model": _name(res.model),
                    "configuration": p,
                    "class": s.precision_class(p),
                    "findings": findings,
                    "cells": len(s.inputs) * len(s.anchors),
                    "emergence": dist.get("most_common") if findings else None,
                    "top_introduced_stage": loc.top_stage if loc else None,
                    "output_rel_l2_vs_fp64": s.deviation.vs_fp64.get(p, {}).get(output),
                    "baselines_failing": ";".join(b for b in s.baselines if s.failed_inputs(b, p)),
                }
            )
    return rows


def _f(value: Any, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def concentration_table(stages: Sequence[dict[str, Any]]) -> str:
    """Finding 1: per model and library, the top stages' shares and the Gini coefficient."""
    from anpred.localization.concentration import gini

    lines = [
        "| model | library | stages | top stage | top-1 share | top-2 share | Gini |",
        "|---|---|---|---|---|---|---|",
    ]
    for (model, lib), group in _groups(stages, ("model", "library")).items():
        shares = sorted((r["share"] or 0.0 for r in group), reverse=True)
        top = min(group, key=lambda r: r["rank"] or len(group) + 1)
        values = [r["introduced"] or 0.0 for r in group]
        lines.append(
            f"| {model} | {lib} | {len(group)} | {top['stage']} | {_f(shares[0])} | "
            f"{_f(sum(shares[:2]))} | {_f(gini(values))} |"
        )
    return "\n".join(lines)


def propagation_table(steps: Sequence[dict[str, Any]]) -> str:
    """Finding 3: per model and library, direction changes of the median profile, the
    amplifying and attenuating steps, the steps of largest and smallest gain, the last
    step's gain, and the output's distance from fp64 over the largest along the anchors.
    """
    lines = [
        "| model | library | steps | amplified | attenuated | direction changes | "
        "largest gain | smallest gain | last step (gain) | "
        "output / worst anchor |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (model, lib), group in _groups(steps, ("model", "library")).items():
        signs = [r["direction"] for r in group if r["direction"]]
        changes = sum(a != b for a, b in zip(signs, signs[1:], strict=False))
        up = max(group, key=lambda r: r["gain"] or 0.0)
        down = min(group, key=lambda r: r["gain"] or math.inf)
        last = group[-1]
        devs = [group[0]["deviation_source"], *(r["deviation_target"] for r in group)]
        worst = max((d for d in devs if d is not None), default=None)
        ratio = last["deviation_target"] / worst if worst and last["deviation_target"] else None
        lines.append(
            f"| {model} | {lib} | {len(group)} | {signs.count(1)} | {signs.count(-1)} | "
            f"{changes} | {up['target']} ({_f(up['gain'], '.2g')}x) | "
            f"{down['target']} ({_f(down['gain'], '.2g')}x) | "
            f"{last['target']} ({_f(last['gain'], '.2g')}x) | {_f(ratio, '.2g')} |"
        )
    return "\n".join(lines)


def dimension_table(dims: Sequence[dict[str, Any]], sizes: Sequence[dict[str, Any]]) -> str:
    """Finding 2: channel and border concentration at the worst anchor, and the output's
    distance from fp64 at each swept input size with its slope.
    """
    by_size = _groups(
        [r for r in sizes if r["anchor"] == _last_anchor(sizes, r)], ("model", "library")
    )
    lines = [
        "| model | library | worst anchor | top-5 % channel share | border/interior | "
        "output error by input size | slope (log-log) | trend |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in dims:
        swept = by_size.get((r["model"], r["library"]), [])
        errors = ", ".join(f"{s['size']}: {s['rel_l2_vs_fp64']:.1e}" for s in swept) or "-"
        slope = _f(swept[0]["slope"], "+.2f") if swept else "-"
        trend = swept[0]["trend"] if swept else "-"
        lines.append(
            f"| {r['model']} | {r['library']} | {r['worst_anchor']} | "
            f"{_f(r['top_channel_share'])} | {_f(r['border_interior_ratio'])} | "
            f"{errors} | {slope} | {trend} |"
        )
    return "\n".join(lines)


def _last_anchor(sizes: Sequence[dict[str, Any]], row: dict[str, Any]) -> str:
    anchors = [r["anchor"] for r in sizes if r["model"] == row["model"]]
    return anchors[-1]


def _groups(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> dict[tuple, list]:
    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    return groups


def findings_plots(
    stages: Sequence[dict[str, Any]],
    steps: Sequence[dict[str, Any]],
    sizes: Sequence[dict[str, Any]],
    plots: Path,
) -> list[Path]:
    """One figure per finding, one panel per model: the stage shares per library (stacked
    bars), the distance from fp64 along the anchors (log), the output's distance by size.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []

    def panels(rows: Sequence[dict[str, Any]], name: str, draw: Any) -> None:
        models = list(dict.fromkeys(r["model"] for r in rows))
        if not models:
            return
        cols = min(3, len(models))
        nrows = math.ceil(len(models) / cols)
        fig, axes = plt.subplots(nrows, cols, figsize=(5.5 * cols, 3.8 * nrows), squeeze=False)
        for ax, model in zip(axes.flat, models, strict=False):
            draw(ax, [r for r in rows if r["model"] == model])
            ax.set_title(model, fontsize=9)
        for ax in list(axes.flat)[len(models) :]:
            ax.set_visible(False)
        fig.tight_layout()
        plots.mkdir(parents=True, exist_ok=True)
        fig.savefig(plots / f"{name}.png", dpi=90)
        plt.close(fig)
        written.append(plots / f"{name}.png")

    def shares(ax: Any, rows: list[dict[str, Any]]) -> None:
        libs = list(dict.fromkeys(r["library"] for r in rows))
        bottom = [0.0] * len(libs)
        for stage in dict.fromkeys(r["stage"] for r in rows):
            values = [
                next(
                    (
                        r["share"] or 0.0
                        for r in rows
                        if r["library"] == lib and r["stage"] == stage
                    ),
                    0.0,
                )
                for lib in libs
            ]
            ax.bar(libs, values, bottom=bottom, label=stage)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set_ylabel("share of introduced error")
        ax.tick_params(axis="x", rotation=45, labelsize=7)
        ax.legend(fontsize=5, ncol=2)

    def profile(ax: Any, rows: list[dict[str, Any]]) -> None:
        for lib, group in _groups(rows, ("library",)).items():
            ys = [group[0]["deviation_source"], *(r["deviation_target"] for r in group)]
            xs = [group[0]["source"], *(r["target"] for r in group)]
            ax.plot(
                range(len(xs)), [y or math.nan for y in ys], marker="o", markersize=3, label=lib[0]
            )
            ax.set_xticks(range(len(xs)), xs, rotation=45, ha="right", fontsize=6)
        ax.set_yscale("log")
        ax.set_ylabel("rel L2 vs fp64 (median)")
        ax.legend(fontsize=6)

    def by_size(ax: Any, rows: list[dict[str, Any]]) -> None:
        last = rows[-1]["anchor"]
        for lib, group in _groups([r for r in rows if r["anchor"] == last], ("library",)).items():
            ax.plot(
                [r["size"] for r in group],
                [r["rel_l2_vs_fp64"] for r in group],
                marker="o",
                label=lib[0],
            )
        ax.set_yscale("log")
        ax.set_xlabel("input size")
        ax.set_ylabel(f"{last}: rel L2 vs fp64")
        ax.legend(fontsize=6)

    panels(stages, "concentration", shares)
    panels(steps, "propagation", profile)
    panels(sizes, "sizes", by_size)
    return written


def write_findings(results: Sequence[ModelResult], out: Path) -> Path:
    """Write the findings' CSV files, tables (``findings.md``) and plots into ``out``."""
    stages, steps = stage_rows(results), propagation_rows(results)
    dims, sizes = dimension_rows(results), size_rows(results)
    tables = {
        "stages.csv": stages,
        "propagation.csv": steps,
        "dimension.csv": dims,
        "sizes.csv": sizes,
        "clean.csv": clean_rows(results),
        "configurations.csv": configuration_rows(results),
    }
    for name, rows in tables.items():
        if rows:
            _write_text(out / name, _csv_text(rows))
    plots = findings_plots(stages, steps, sizes, out / "plots")
    text = [
        "# The three findings (clean runs and the configuration study, no injection)",
        "",
        "Per model and participant: the libraries of the clean fp32 run, then the "
        "configurations of the study (bf16 and fp32 settings of the same libraries).",
        "",
        "## Stage concentration (share of introduced error per stage, stage isolation)",
        "",
        concentration_table(stages),
        "",
        "## Dimension sensitivity (worst anchor; output by input size, `anpred sweep`)",
        "",
        dimension_table(dims, sizes),
        "",
        "## Propagation (distance from fp64 along the anchors, median over inputs)",
        "",
        propagation_table(steps),
        "",
        *(f"![{p.stem}](plots/{p.name})" for p in plots),
        "",
    ]
    path = out / FINDINGS
    _write_text(path, "\n".join(text))
    return path
