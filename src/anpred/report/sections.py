"""The analysis sections of the HTML report.

Verdict, deviation, localization, baselines, findings. Each function takes the run summary
(and the rendered plots) and returns markup.
"""

from __future__ import annotations

from typing import Any

from anpred.report.markup import (
    Markup,
    badge,
    details,
    esc,
    figure,
    join,
    key_values,
    note,
    number,
    table,
    tag,
    verdict_badge,
)
from anpred.report.plots import RenderedPlots
from anpred.report.run_summary import (
    RunSummary,
    as_dict,
    as_float,
    as_list,
    input_list,
    noise_rule_line,
    precision_lines,
    short_baseline_name,
)


def _plot(plots: RenderedPlots, name: str, alt: str, caption: str, missing: str) -> Markup:
    if name in plots.images:
        return figure(plots.images[name], alt, caption)
    if name in plots.errors:
        return note(f"The plot could not be drawn: {plots.errors[name]}", "fail")
    return note(missing, "muted")


def _closest_to_fp64(view: RunSummary) -> tuple[str, float] | None:
    """Return the participant whose final anchor lies closest to the fp64 reference."""
    anchors = view.anchors
    if not anchors:
        return None
    final = anchors[-1]
    scores = [(v, p) for p, row in view.deviation("vs_fp64").items()
              if (v := row.get(final)) is not None]
    if not scores:
        return None
    value, name = min(scores)
    return name, value


def _oracle(oracle: dict[str, Any]) -> Markup:
    """The oracle's settings, its noise rule, and a calibration as a table (anchor → factor
    of deviations and of introduced errors) instead of one long dict.
    """
    if not oracle:
        return Markup("")
    settings = ", ".join(
        f"{k} = {v}" for k, v in oracle.items() if k not in ("calibration", "threshold_rule")
    )
    parts = [esc(settings)]
    rule = noise_rule_line(oracle)
    if rule:
        parts.append(esc(f"noise rule: {rule}"))
    calibration = as_dict(oracle.get("calibration"))
    if calibration:
        deviation = as_dict(calibration.get("factor"))
        introduced = as_dict(calibration.get("introduced_factor"))
        fixed = as_float(oracle.get("noise_factor")) or 10
        shown = lambda v: number(v) if as_float(v) is not None else f"{fixed:g} (fixed)"  # noqa: E731
        rows = [
            [a, shown(deviation.get(a)), shown(introduced.get(a))]
            for a in dict.fromkeys([*deviation, *introduced])
        ]
        parts.append(table(["anchor", "deviation factor", "introduced-error factor"], rows,
                           cls="calibration"))
        learnt = (f"learnt on inputs {', '.join(map(str, as_list(calibration.get('inputs'))))} "
                  f"with {', '.join(map(str, as_list(calibration.get('participants'))))}")
        parts.append(tag("span", learnt, cls="muted"))
    return Markup("<br>".join(esc(p) for p in parts))


def verdict_section(view: RunSummary) -> Markup:
    """Verdict at a glance: what ran, the finding count, failures, the pairwise caveat."""
    counts = view.findings_per_participant
    total = sum(counts.values())
    if total:
        headline = badge(f"{total} finding{'s' if total != 1 else ''}", "fail big")
        detail = ", ".join(f"{p}: {n}" for p, n in counts.most_common())
    elif view.judged:
        headline = badge("clean", "pass big")
        detail = f"no findings; {len(view.judged)} participants judged"
    else:
        headline = badge("no verdict", "warn big")
        detail = "no participant was judged (partial or interrupted run)"
    if view.failed:
        detail += f"; {len(view.failed)} failed (see below)"
    parts: list[Any] = [Markup(f'<p class="headline">{headline} {esc(detail)}</p>')]
    model = view.model
    shape = model.get("input_shape")
    inputs = view.inputs
    input_text = ", ".join(i["id"] + (f" ({i['source']})" if i["source"] else "") for i in inputs)
    oracle = view.section("oracle")
    pairs: list[tuple[str, Any]] = [
        ("model", view.model_name),
        ("weights", model.get("weights")),
        ("input shape", "x".join(str(d) for d in shape) if isinstance(shape, list) else None),
        ("model inputs", input_list(model) or None),
        ("opset", model.get("opset")),
        ("anchors", f"{len(view.anchors)} ({model.get('granularity') or '?'} granularity)"),
        ("inputs", f"{len(inputs)}: {input_text}" if inputs else None),
        ("participants", ", ".join(p.name for p in view.participants) or None),
        ("reference", " / ".join(f"{k}: {v}" for k, v in view.reference.items()) or None),
        ("oracle", _oracle(oracle) or None),
        ("precision classes",
         Markup("<br>".join(esc(line) for line in precision_lines(view.section("precision"))))
         or None),
    ]
    closest = _closest_to_fp64(view)
    if closest:
        pairs.append(("closest to fp64 at the output",
                      f"{closest[0]} (relative L2 {number(closest[1])})"))
    if view.wall_seconds is not None:
        pairs.append(("wall time", f"{view.wall_seconds:.1f} s"))
    parts.append(key_values(pairs))
    for record in view.failed:
        message = f": {record.message}" if record.message else ""
        parts.append(note(f"{record.name} failed ({record.status} at "
                          f"{record.step or 'unknown step'}){message}", "fail"))
    if view.pairwise:
        parts.append(note("Only two participants were judged: the consensus degenerates to a "
                          "pairwise comparison, so a deviation is a difference between the two "
                          "and cannot be blamed on either one.", "warn"))
    masking = view.masking
    inner = masking.get("n_cases_with_inner_finding")
    if isinstance(inner, int) and inner:
        parts.append(note(f"{inner} of {masking.get('n_cases', '?')} (participant, input) "
                          "cases have anchor findings; the baselines section shows which "
                          "output-level checks miss them."))
    return join(parts)


def heatmap_section(view: RunSummary, plots: RenderedPlots) -> Markup:
    """Deviation heatmap plus its numbers."""
    parts = [_plot(plots, "heatmap", "deviation heatmap",
                   "Median relative L2 deviation over inputs, per anchor (rows) and participant "
                   "(columns), log colour scale. Left: distance to the consensus of all "
                   "participants; right: distance to the fp64 reference. A red outline marks "
                   "a (participant, anchor) with at least one finding.",
                   "No deviation data in this summary.")]
    anchors = view.anchors
    for kind, title in (("vs_consensus", "vs consensus"), ("vs_fp64", "vs fp64")):
        dev = view.deviation(kind)
        if dev and anchors:
            rows = [[a, *[number(dev[p].get(a)) for p in dev]] for a in anchors]
            parts.append(details(f"numbers: median relative L2 {title}",
                                 table(["anchor", *dev], rows, cls="num")))
    return join(parts)


def _profile_extremes(record: dict[str, Any]) -> tuple[str, str]:
    """Return the strongest amplification and attenuation over the participant's inputs."""
    steps: dict[str, list[tuple[float, str]]] = {"max_amplification": [], "max_attenuation": []}
    for profile in as_dict(record.get("profiles")).values():
        for key, found in steps.items():
            step = as_dict(as_dict(profile).get(key))
            gain = as_float(step.get("gain"))
            if gain is not None:
                found.append((gain, f"{step.get('source')} → {step.get('target')} ×{gain:.3g}"))
    amp, att = steps["max_amplification"], steps["max_attenuation"]
    return (max(amp)[1] if amp else "-"), (min(att)[1] if att else "-")


def propagation_section(view: RunSummary, plots: RenderedPlots) -> Markup:
    """Propagation curves and the per-participant gain summary."""
    fp32 = view.reference.get("fp32")
    same = f" (the line of {fp32}, the fp32 reference, is the noise floor itself)" if fp32 else ""
    parts = [_plot(plots, "propagation", "propagation curves",
                   "Relative L2 deviation from the fp64 reference along the anchors (log). "
                   "Thick lines: median over inputs; thin lines: each input; dashed: the fp32 "
                   f"noise floor{same}; red crosses: findings.",
                   "No propagation data in this summary.")]
    rows = []
    for p, record in view.propagation().items():
        amp, att = _profile_extremes(record)
        changes = number(as_float(record.get("direction_changes")))
        rows.append([p, record.get("worst_anchor"), changes, amp, att])
    if rows:
        parts.append(table(["participant", "worst anchor", "direction changes (median)",
                            "strongest amplification", "strongest attenuation"], rows))
    return join(parts)


def introduced_section(view: RunSummary, plots: RenderedPlots) -> Markup:
    """Stage isolation: introduced error per stage and its concentration."""
    parts = [_plot(plots, "introduced", "introduced error per stage",
                   "Error each stage adds by itself (stage isolation: every participant runs "
                   "the stage on the fp64 reference's input), median over inputs, log scale.",
                   "No stage-isolation data in this summary (isolation off, or the run "
                   "stopped before it).")]
    rows = []
    for p in view.localization_participants():
        conc = view.concentration(p)
        shares = as_dict(conc.get("top_shares"))
        rows.append([p, view.top_stage(p), number(as_float(shares.get("1"))),
                     number(as_float(shares.get("3"))), number(as_float(conc.get("gini"))),
                     number(as_float(conc.get("total")))])
    if rows:
        parts.append(table(["participant", "top stage", "top-1 share", "top-3 share", "Gini",
                            "total introduced"], rows, cls="num"))
    return join(parts)


def channel_section(view: RunSummary, plots: RenderedPlots) -> Markup:
    """Dimension sensitivity at each participant's worst anchor."""
    parts = [_plot(plots, "channels", "per-channel error",
                   "At each participant's worst anchor (largest median deviation from fp64 "
                   "before the output): the share of the error carried by the top channels, "
                   "and the mean error on the spatial border over the interior.",
                   "No per-channel data in this summary.")]
    rows = []
    for p, record in view.propagation().items():
        dims = as_dict(record.get("dimension_at_worst"))
        if dims:
            rows.append([p, record.get("worst_anchor"),
                         number(as_float(dims.get("top_channel_share"))),
                         number(as_float(dims.get("border_interior_ratio")))])
    if rows:
        parts.append(table(["participant", "worst anchor", "top-channel share",
                            "border / interior"], rows, cls="num"))
    return join(parts)


def baselines_section(view: RunSummary) -> Markup:
    """Output-level baselines and anpred's anchor-level verdict, side by side."""
    names = view.baseline_names
    counts = view.findings_per_participant
    n_inputs = len(view.input_ids)
    finding_inputs: dict[str, set[str]] = {}
    for f in view.findings:
        finding_inputs.setdefault(str(f.get("participant")), set()).add(str(f.get("input")))
    rows = []
    for record in view.participants:
        p = record.name
        cells: list[Any] = [p]
        for b in names:
            passed, failed = view.baseline_verdict(b, p)
            label = f"FAIL {len(failed)}/{n_inputs}" if passed is False and n_inputs else ""
            cells.append(verdict_badge(passed, "failed inputs: " + ", ".join(failed)
                                       if failed else "", label))
        judged = p in view.judged
        n = counts.get(p, 0)
        cells.append(badge(str(n), "fail" if n else "pass") if judged or n else badge("-", "muted"))
        cells.append(", ".join(sorted(finding_inputs.get(p, ()))) or "-")
        cells.append(view.emergence(p) or "-")
        rows.append(cells)
    if not rows:
        return note("No participant records in this summary.", "muted")
    header = ["participant", *[short_baseline_name(b) for b in names], "anpred findings",
              "inputs with findings", "emergence"]
    parts: list[Any] = [table(header, rows),
                        note("Baselines judge only the final output against the fp32 reference "
                             "(FAIL k/n: k of n inputs failed; hover it for their ids). "
                             "anpred judges every anchor against the consensus and the fp64 "
                             "noise floor.")]
    if names:
        parts.append(tag("p", "columns: " + ", ".join(f"{short_baseline_name(b)} = {b}"
                                                      for b in names), cls="small"))
    masking = view.masking
    masked = as_dict(masking.get("masked_cases"))
    if masked:
        findings = as_dict(masking.get("masked_findings"))
        mrows = [[b, masked.get(b), findings.get(b)] for b in masked]
        parts.append(tag("h3", "Masking: anchor findings with a clean output"))
        parts.append(table(["baseline", "masked (participant, input) cases",
                            "masked anchor findings"], mrows, cls="num"))
    parts.append(_baseline_details(view))
    return join(parts)


def _baseline_details(view: RunSummary) -> Markup:
    rows = []
    for b, per in view.section("baseline_details").items():
        for p, entry in as_dict(per).items():
            for input_id, stats in as_dict(as_dict(entry).get("per_input")).items():
                stats = as_dict(stats)
                shown = {k: v for k, v in stats.items() if k != "passed"}
                text = join([Markup(f"{esc(k)}={number(v)}") for k, v in shown.items()], " ")
                rows.append([b, p, input_id, verdict_badge(stats.get("passed")
                                                           if isinstance(stats.get("passed"), bool)
                                                           else None), text])
    if not rows:
        return Markup("")
    return details("baseline statistics per input",
                   table(["baseline", "participant", "input", "verdict", "statistics"], rows))


def findings_section(view: RunSummary) -> Markup:
    """One row per finding, with the numbers the oracle decided from."""
    findings = view.findings
    if not findings:
        return note("No findings: at every anchor, every participant's deviation was within its "
                    "population or under the fp64-calibrated noise floor.", "muted")
    order = {a: i for i, a in enumerate(view.anchors)}
    findings.sort(key=lambda f: (str(f.get("participant")), order.get(str(f.get("anchor")), 1e9),
                                 str(f.get("input"))))
    rows = []
    for f in findings:
        m = as_dict(f.get("metrics"))
        corroborating = [str(c) for c in as_list(f.get("corroborating"))]
        rows.append([f.get("participant"), f.get("anchor"), f.get("input"), m.get("metric"),
                     number(m.get("value")), number(m.get("population_median")),
                     number(m.get("outlier_threshold")), number(m.get("noise_threshold")),
                     number(m.get("vs_fp64")), number(m.get("introduced")),
                     number(m.get("introduced_threshold")), m.get("exceeded"),
                     ", ".join(corroborating) or "-"])
    legend = note("A finding exceeds both the outlier and the noise threshold (outlier, "
                  "above_noise), or its stage's introduced error -- the stage run alone on the "
                  "fp64 reference's input -- exceeds the same two rules among the introduced "
                  "errors (introduced), or it is non-finite.", "muted")
    return Markup(legend + table(["participant", "anchor", "input", "metric", "value",
                           "population median", "outlier threshold", "noise threshold",
                           "vs fp64", "introduced", "introduced threshold", "exceeded",
                           "corroborating metrics"], rows, cls="num"))
