"""The evaluation's tables (Markdown + CSV) and plot, from the campaign's rows.

- RQ1 detection: per fault kind and severity, the detection rate of anpred (any anchor
  finding for the faulty participant) and of every output-level baseline (failing the
  faulty participant on an input where it passed the clean one); and the faults anpred
  detects that no baseline sees at the output.
- Severity curves (:mod:`anpred.evaluation.curves`): detection rate of every method from
  the mildest to the most severe fault, its false alarms on the clean run, and the severity
  at which it first detects half of the faults.
- RQ2 localization: share of faults whose stage is ranked first / in the top 3 by stage
  isolation, whose emergence anchor is the injected stage, whose library is blamed.
- RQ3 characterization (clean runs): stage concentration, propagation, masking,
  channel concentration per model and participant.
- False positives on the clean runs: anpred's findings per (participant, anchor, input)
  cell and each baseline's failures per (participant, input) cell.
- The real-configuration study (grid key ``configurations``): per model and precision
  configuration, whether it deviates, where the deviation emerges and is introduced, how
  it grows, and which output-level baselines see it.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anpred.evaluation.curves import half_detection_table, severity_curves, severity_plot
from anpred.evaluation.results import ModelResult
from anpred.evaluation.scoring import fault_label
from anpred.library.precision import ideal_class
from anpred.participants import REFERENCE32
from anpred.store import EvalStore
from anpred.store.outcome import Status
from anpred.store.summary import ParticipantRecord


def _rate(values: Sequence[bool]) -> str:
    return (
        f"{sum(values)}/{len(values)} ({100 * sum(values) / len(values):.0f} %)" if values else "-"
    )


def _baselines(rows: Sequence[dict[str, Any]]) -> list[str]:
    return sorted({k for r in rows for k in r if k.startswith("baseline:")})


def detection_table(rows: Sequence[dict[str, Any]]) -> str:
    """RQ1: detection rate per method by fault kind and severity."""
    baselines = _baselines(rows)
    head = ["model", "kind", "severity", "faults", "anpred"] + [
        b.split(":", 1)[1] for b in baselines
    ]
    head += ["anpred only (no baseline)", "baseline only (anpred missed)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    groups: dict[tuple[str, str, Any], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["model"], fault_label(r), r["severity"]), []).append(r)
    for (model, kind, severity), group in groups.items():
        anpred = [r["anpred_detected"] for r in group]
        any_base = [any(r[b] for b in baselines) for r in group]
        cells = [model, kind, str(severity), str(len(group)), _rate(anpred)]
        cells += [_rate([r[b] for r in group]) for b in baselines]
        cells.append(str(sum(a and not b for a, b in zip(anpred, any_base, strict=True))))
        cells.append(str(sum(b and not a for a, b in zip(anpred, any_base, strict=True))))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def totals_table(rows: Sequence[dict[str, Any]]) -> str:
    """Faults detected per model and faulty library by anpred and by every baseline, and
    those localized to the exact stage (isolation top-1) with the library blamed; a line
    per model over its libraries and one over everything.
    """
    baselines = _baselines(rows)
    head = ["model", "faulty library", "faults", "anpred"] + [b.split(":", 1)[1] for b in baselines]
    head.append("exact stage + library")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def line(model: str, lib: str, group: Sequence[dict[str, Any]]) -> str:
        n = len(group)
        cells = [model, lib, str(n), f"{sum(r['anpred_detected'] for r in group)}/{n}"]
        cells += [f"{sum(bool(r.get(b)) for r in group)}/{n}" for b in baselines]
        exact = sum(r["isolation_top1"] and r["library_blamed"] for r in group)
        return "| " + " | ".join([*cells, f"{exact}/{n}"]) + " |"

    models: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in rows:
        models.setdefault(r["model"], {}).setdefault(r["library"], []).append(r)
    for model, libs in models.items():
        lines += [line(model, lib, group) for lib, group in libs.items()]
        if len(libs) > 1:
            lines.append(line(f"**{model}**", "**all**", [r for g in libs.values() for r in g]))
    if len(models) > 1:
        lines.append(line("**all**", "**all**", rows))
    return "\n".join(lines)


def localization_table(rows: Sequence[dict[str, Any]]) -> str:
    """RQ2: stage and library localization of injected faults."""
    head = [
        "model",
        "library",
        "kind",
        "severity",
        "faults",
        "detected",
        "stage top-1 (isolation)",
        "stage top-3 (isolation)",
        "emergence = stage",
        "library blamed",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    groups: dict[tuple[str, str, str, Any], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["library"], fault_label(r), r["severity"]), []).append(r)
    for (model, lib, kind, severity), group in groups.items():
        lines.append(
            "| "
            + " | ".join(
                [
                    model,
                    lib,
                    kind,
                    str(severity),
                    str(len(group)),
                    _rate([r["anpred_detected"] for r in group]),
                    _rate([r["isolation_top1"] for r in group]),
                    _rate([r["isolation_top3"] for r in group]),
                    _rate([r["emergence_at_stage"] >= 0.5 for r in group]),
                    _rate([r["library_blamed"] for r in group]),
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def misses(rows: Sequence[dict[str, Any]]) -> str:
    """Faults anpred did not localize to the exact stage and library, with their numbers."""
    lines = [
        "| participant | kind | severity | stage | detected | first flagged at stage | "
        "isolation top-1 | blamed | stage rel L2 vs fp64 | output rel L2 vs fp64 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["isolation_top1"] and r["library_blamed"] and r["anpred_flagged_at_stage"]:
            continue
        lines.append(
            f"| {r['participant']} | {r['kind']} | {r['severity']} | {r['stage']} | "
            f"{r['anpred_detected']} | {r['anpred_flagged_at_stage']} | "
            f"{r['isolation_top1']} | {r['library_blamed']} | "
            f"{r['stage_rel_l2_vs_fp64'] or 0:.1e} | {r['output_rel_l2_vs_fp64'] or 0:.1e} |"
        )
    return "\n".join(lines) if len(lines) > 2 else "none: every fault was localized"


def false_positive_table(results: Sequence[ModelResult]) -> str:
    """False-positive rate of every method on the clean fp32 runs."""
    lines = ["| model | method | flagged cells | rate |", "|---|---|---|---|"]
    for res in results:
        s = res.clean
        judged = [p.participant for p in s.participants if p.judged]
        n_inputs, n_anchors = len(s.inputs), len(s.anchors)
        cells = len(judged) * n_inputs * n_anchors
        flagged = len(s.findings)
        lines.append(
            f"| {res.model} | anpred (anchors) | {flagged}/{cells} | "
            f"{100 * flagged / max(cells, 1):.2f} % |"
        )
        others = [p for p in judged if p != REFERENCE32]
        for name in s.baselines:
            failed = sum(len(s.failed_inputs(name, p)) for p in others)
            total = len(others) * n_inputs
            lines.append(
                f"| {res.model} | {name} (output) | {failed}/{total} | "
                f"{100 * failed / max(total, 1):.2f} % |"
            )
    return "\n".join(lines)


def characterization_table(results: Sequence[ModelResult]) -> str:
    """RQ3 on the clean runs: concentration, propagation, dimension."""
    lines = [
        "| model | participant | top introduced stage | top-1 share | Gini | direction "
        "changes | worst anchor | top-5 % channel share | border/interior |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        prop = res.clean.characterization.propagation
        for p, data in res.clean.localization.participants.items():
            conc = data.concentration or {}
            pr = prop.get(p)
            dim = pr.dimension_at_worst if pr else {}

            def f(v: Any, spec: str = ".2f") -> str:
                return "-" if v is None else format(v, spec)

            lines.append(
                f"| {res.model} | {p} | {data.top_stage} | "
                f"{f(conc.get('top_shares', {}).get('1'))} | {f(conc.get('gini'))} | "
                f"{f(pr.direction_changes if pr else None, '.1f')} | "
                f"{pr.worst_anchor if pr else None} | "
                f"{f(dim.get('top_channel_share'))} | {f(dim.get('border_interior_ratio'))} |"
            )
    return "\n".join(lines)


def _config_notes(record: ParticipantRecord | None) -> str:
    """What a configuration really did, from its worker's record."""
    if record is None:
        return ""
    notes = []
    settings = record.settings
    if settings.get("fell_back"):
        notes.append(
            f"{settings.get('precision_requested')} not supported here: ran "
            f"{settings.get('precision')}"
        )
    if record.status != Status.OK:
        notes.append(f"{record.status}: {record.message[:80]}")
    observer = record.observer
    if observer.get("inputs") and not observer.get("identical"):
        notes.append(f"anchors change its output by up to {observer.get('max_abs_diff'):.1e}")
    return "; ".join(notes)


def configuration_table(results: Sequence[ModelResult]) -> str:
    """The real-configuration study: which configurations deviate, where, how it grows.

    One row per (model, configuration), its precision class beside its name (a reduced
    class is judged against its ideal reference, ``docs/oracle.md``; the ideal references
    themselves get no row). *Deviating* counts the configuration's findings
    over its (anchor, input) cells; *emergence* is its most common first flagged anchor;
    *top introduced stage* ranks stages by the error each introduces in isolation;
    *growth* is its largest distance from fp64 over the anchors divided by the distance at
    the emergence anchor; *output vs default* divides its output distance from fp64 by
    that of the same library's default configuration; element-wise baselines fail fp32
    noise, so the baselines that fail a configuration but pass its default are listed
    (for torch, whose default is the baselines' reference: pass every default library).
    """
    head = [
        "model",
        "configuration",
        "deviating? (findings/cells)",
        "emergence",
        "top introduced stage",
        "worst anchor",
        "growth after emergence",
        "direction changes",
        "output rel L2 vs fp64",
        "output vs default",
        "output baselines failing",
        "of them, passing the default configuration",
        "notes",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for res in results:
        s = res.configurations
        if not s:
            continue
        anchors = s.anchor_keys
        n_inputs = len(s.inputs)
        records = {r.participant: r for r in s.participants}
        clean = {r.participant for r in res.clean.participants}
        configs = [n for n in records if n not in clean and ideal_class(n) is None]
        vs64 = s.deviation.vs_fp64
        loc = s.localization.participants
        prop = s.characterization.propagation
        for name in sorted(configs, key=lambda n: (n.split("[")[0], n)):
            record = records.get(name)
            findings = len(s.findings_of(name))
            mine = loc.get(name)
            dist = (mine.emergence_distribution if mine else None) or {}
            emergence = dist.get("most_common") if findings else None
            dev = vs64.get(name, {})
            known = {a: dev.get(a) for a in anchors if dev.get(a) is not None}
            worst = max(known, key=lambda a: known[a]) if known else None
            growth = (
                known[worst] / known[emergence]
                if emergence in known and worst and known[emergence] > 0
                else None
            )
            output = known.get(anchors[-1]) if anchors else None
            default = vs64.get(name.split("[")[0], {}).get(anchors[-1]) if anchors else None
            baselines = s.baselines
            failing = [b for b in baselines if s.failed_inputs(b, name)]
            # the baselines compare with the fp32 reference (torch), so they pass it by
            # construction: a torch configuration is set against every default library
            library = name.split("[")[0]
            defaults = sorted(clean - {REFERENCE32}) if library == REFERENCE32 else [library]
            beyond_default = [
                b for b in failing if not any(s.failed_inputs(b, d) for d in defaults)
            ]

            def f(v: Any, spec: str = ".1e") -> str:
                return "-" if v is None else format(v, spec)

            judged_class = s.precision_class(name)
            cells = [
                res.model,
                name if judged_class == "fp32" else f"{name} ({judged_class})",
                f"{'**yes**' if findings else 'no'} ({findings}/{len(anchors) * n_inputs})",
                emergence or "-",
                (mine.top_stage if mine else None) or "-",
                worst or "-",
                f(growth, ".1f") + ("x" if growth is not None else ""),
                f(prop[name].direction_changes if name in prop else None, ".0f"),
                f(output),
                f(output / default if output is not None and default else None, ".1f"),
                f"{len(failing)}/{len(baselines)}",
                ", ".join(beyond_default) or "none",
                _config_notes(record),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def size_table(results: Sequence[ModelResult]) -> str:
    """Dimension sensitivity: how each participant's error changes with the input size.

    Per model and participant: the output's and the worst anchor's distance from fp64 at
    the smallest and largest size, the log-log slope and the trend (``anpred sweep``).
    """
    lines = [
        "| model | participant | anchor | error at smallest size | error at largest size | "
        "slope (log-log) | trend |",
        "|---|---|---|---|---|---|---|",
    ]
    for res in results:
        if not res.sweep:
            continue
        sizes = res.sweep["sizes"]
        for participant, data in res.sweep["participants"].items():
            errors = data["errors"]
            if not errors:
                continue
            output = list(errors)[-1]
            worst = max(errors, key=lambda a: max(errors[a]))
            for anchor in dict.fromkeys([worst, output]):
                fit = data["fits"][anchor]
                lines.append(
                    f"| {res.model} ({sizes[0]}..{sizes[-1]}) | {participant} | {anchor} | "
                    f"{errors[anchor][0]:.1e} | {errors[anchor][-1]:.1e} | "
                    f"{fit['slope']:+.2f} | {fit['trend']} |"
                )
    return "\n".join(lines)


def _severity_label(kind: str) -> str:
    """The x-axis label of a fault kind: what its severity means, wrapped."""
    import textwrap

    from anpred.inject.spec import fault_kinds

    known = fault_kinds().get(kind)
    doc = known.severity_doc if known is not None else ""
    return "severity" + (": " + "\n".join(textwrap.wrap(doc, 60)) if doc else "")


def detection_plot(rows: Sequence[dict[str, Any]], path: Path) -> Path | None:
    """Detection rate per method against fault severity (one panel per kind)."""
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = sorted({r["kind"] for r in rows})
    methods = ["anpred_detected", *_baselines(rows)]
    fig, axes = plt.subplots(1, len(kinds), figsize=(5 * len(kinds), 3.6), squeeze=False)
    for ax, kind in zip(axes[0], kinds, strict=True):
        sub = [r for r in rows if r["kind"] == kind]
        severities = sorted({r["severity"] for r in sub})
        for method in methods:
            rates = [
                sum(r[method] for r in sub if r["severity"] == s)
                / max(1, sum(1 for r in sub if r["severity"] == s))
                for s in severities
            ]
            label = "anpred (anchors)" if method == "anpred_detected" else method.split(":", 1)[1]
            ax.plot(
                [str(s) for s in severities],
                rates,
                marker="o",
                label=label,
                linewidth=2.5 if method == "anpred_detected" else 1,
            )
        ax.set_title(f"fault: {kind}")
        ax.set_xlabel(_severity_label(kind))
        ax.set_ylabel("detection rate")
        ax.set_ylim(-0.05, 1.05)
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def configuration_plot(results: Sequence[ModelResult], path: Path) -> Path | None:
    """Distance from fp64 along the anchors, one panel per model, one line per participant.

    The study's configurations are drawn solid, the default configurations thin and grey,
    the fp32 noise floor dashed: a deviating configuration leaves the grey band at its
    emergence anchor and the line shows how its error grows or shrinks downstream.
    """
    studies = [res for res in results if res.configurations]
    if not studies:
        return None
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(2, len(studies))
    rows_n = math.ceil(len(studies) / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(7 * cols, 3.8 * rows_n), squeeze=False)
    for ax, res in zip(axes.flat, studies, strict=False):
        s = res.configurations
        assert s is not None
        anchors = s.anchor_keys
        clean = {r.participant for r in res.clean.participants}
        x = list(range(len(anchors)))
        for name, per in s.deviation.vs_fp64.items():
            y = [per.get(a) or math.nan for a in anchors]
            if name in clean:
                ax.plot(x, y, color="0.7", linewidth=0.8)
            else:
                ax.plot(x, y, marker="o", markersize=3, linewidth=1.4, label=name)
        floor = [
            (s.noise_floor[a].median if a in s.noise_floor else None) or math.nan for a in anchors
        ]
        ax.plot(x, floor, "k--", linewidth=1, label="fp32 noise floor")
        ax.set_yscale("log")
        ax.set_xticks(x, anchors, rotation=45, ha="right", fontsize=7)
        ax.set_title(f"{Path(res.model).stem}: distance from fp64 (grey: default configurations)")
        ax.set_ylabel("rel L2 vs fp64")
        ax.legend(fontsize=6, ncol=2, loc="best")
    for ax in list(axes.flat)[len(studies) :]:
        ax.set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_tables(results: Sequence[ModelResult], out: Path, faults_csv: bool = True) -> Path:
    """Write the Markdown tables, the faults CSV (unless ``faults_csv`` is false: a results
    folder writes its own, :mod:`anpred.evaluation.results`) and the plots; return the
    Markdown path.
    """
    store = EvalStore(out)
    rows = [r for res in results for r in res.rows]
    if rows and faults_csv:
        columns = list(dict.fromkeys(k for r in rows for k in r))
        with open(store.faults_csv_path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
    plot = detection_plot(rows, store.plot_path("detection"))
    curves = severity_curves(rows, results)
    severity = severity_plot(curves, store.plot_path("severity"))
    sections: list[tuple[str, str]] = []
    if rows:
        sections += [
            ("## Totals per model and faulty library", totals_table(rows)),
            (
                "## RQ1 detection (injected faults)",
                detection_table(rows)
                + "\n\nanpred detects a fault when any anchor finding falls on the faulty "
                "participant. A baseline detects it when it fails the faulty participant on an "
                "input where it passed the same library's clean participant; a baseline that "
                "already fails the clean participant on every input (fp32 noise) is never "
                "credited.",
            ),
            ("## RQ2 localization (injected faults)", localization_table(rows)),
            ("### Faults not localized to the exact stage and library", misses(rows)),
            (
                "## Severity curves (detection from mild to severe faults)",
                half_detection_table(curves)
                + "\n\n*detects half from*: the mildest severity at which the method detects "
                "at least half of the faults injected at that severity (mantissa: bits kept, "
                "fewer is more severe; bf16/fp16: error scale). False alarms: share of clean "
                "(participant, input) pairs flagged on the clean fp32 run."
                + (f"\n\n![severity]({store.plot_link('severity')})" if severity else ""),
            ),
        ]
    sections += [
        ("## RQ3 characterization (clean fp32 runs)", characterization_table(results)),
        ("## False positives on clean fp32 runs", false_positive_table(results)),
    ]
    if any(res.sweep for res in results):
        sections.append(
            ("## RQ3 dimension sensitivity (input size, clean fp32)", size_table(results))
        )
    if any(res.configurations for res in results):
        sections.append(
            ("## Real-configuration study (no injection)", configuration_table(results))
        )
    text = ["# anpred evaluation", ""]
    for title, body in sections:
        text += [title, "", body, ""]
    if plot:
        text += [f"![detection]({store.plot_link('detection')})", ""]
    if configuration_plot(results, store.plot_path("configurations")):
        text += [f"![configurations]({store.plot_link('configurations')})", ""]
    path = store.tables_path
    path.write_text("\n".join(text))
    return path
