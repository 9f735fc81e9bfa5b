"""The record sections of the HTML report.

Observer effect, alignment, library versions and settings, and whatever could not be run,
aligned or compared.
"""

from __future__ import annotations

from typing import Any

from anpred.report.identical import identical_notes
from anpred.report.markup import Markup, badge, esc, join, mapping_text, note, number, table, tag
from anpred.report.run_summary import RunSummary, as_float, as_list
from anpred.store.outcome import FINISHED_STATES


def _observer_cell(observer: dict[str, Any]) -> Markup:
    if not observer or not observer.get("inputs"):
        return badge("no record", "muted")
    if observer.get("identical") is True:
        return badge("identical", "pass")
    diff = as_float(observer.get("max_abs_diff"))
    return badge(f"differs (max |Δ| {number(diff)})" if diff is not None else "differs", "fail")


def _alignment_text(steps_by_anchor: dict[str, list[str]], anchors: list[str]) -> Markup:
    """Group anchors by the alignment steps they needed (``cast ...: all 9 anchors``)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for anchor, steps in steps_by_anchor.items():
        groups.setdefault(tuple(steps), []).append(anchor)
    lines = []
    for steps, members in groups.items():
        where = (f"all {len(members)} anchors" if anchors and set(members) >= set(anchors)
                 else ", ".join(members))
        what = "; ".join(steps) if steps else "nothing (already in the reference form)"
        lines.append(Markup(f"{esc(what)} <span class=\"small\">({esc(where)})</span>"))
    return join(lines, Markup("<br>")) if lines else esc("-")


def observer_alignment_section(view: RunSummary) -> Markup:
    """Observer-effect checks and the alignment steps applied to each participant."""
    anchors = view.anchors
    alignment = view.alignment
    rows = []
    for record in view.participants:
        obs = record.observer
        rows.append([record.name, _observer_cell(obs), obs.get("inputs", "-"),
                     _alignment_text(alignment.get(record.name, {}), anchors)])
    for name in alignment:
        if name not in {r.name for r in view.participants}:
            rows.append([name, badge("no record", "muted"), "-",
                         _alignment_text(alignment[name], anchors)])
    if not rows:
        return note("No observer or alignment records in this summary.", "muted")
    return join([
        table(["participant", "observer effect", "inputs checked", "alignment steps"], rows),
        note("Observer effect: the final output computed with the anchors exposed must equal "
             "the output without them; any difference is shown here, never hidden. Alignment: "
             "the steps that mapped each capture into the reference representation."),
    ])


def libraries_section(view: RunSummary) -> Markup:
    """Library versions, settings and timings per participant."""
    rows = []
    for record in view.participants:
        timings = {k: f"{v:.2f} s" if isinstance(v, int | float) else v
                   for k, v in record.timings.items()}
        rows.append([record.name, record.library, record.version or "-", record.status,
                     mapping_text(record.settings), mapping_text(timings)])
    if not rows:
        return note("No participant records in this summary.", "muted")
    parts: list[Any] = [
        table(["participant", "library", "version", "status", "settings", "timings"], rows)
    ]
    for sentence in identical_notes(view.raw.get("participants")):
        parts.append(note(f"{sentence[0].upper()}{sentence[1:]}.", "warn"))
    machine = view.section("machine")
    if machine:
        parts.append(note(
            f"Machine: {machine.get('cpu', '?')} ({machine.get('arch', '?')}, "
            f"{machine.get('cores', '?')} cores); numeric features: "
            f"{', '.join(map(str, as_list(machine.get('features')))) or 'none detected'}; "
            f"bf16 arithmetic {'yes' if machine.get('bf16_arithmetic') else 'no'}, "
            f"fp16 arithmetic {'yes' if machine.get('fp16_arithmetic') else 'no'}. "
            "Libraries choose kernels by these: results of reduced-precision configurations "
            "depend on them.", "muted"))
    return join(parts)


def problems_section(view: RunSummary) -> Markup:
    """Failed participants and unaligned / uncompared items."""
    parts: list[Any] = []
    failed = view.failed
    if failed:
        parts.append(tag("h3", "Failed participants"))
        parts.append(table(["participant", "status", "step", "message"],
                           [[r.name, badge(r.status, "fail"), r.step or "-",
                             tag("pre", r.message or "-")] for r in failed]))
    others = [r for r in view.participants
              if not r.failed and r.status not in FINISHED_STATES]
    if others:
        parts.append(note("Participants with an unfinished or unknown state: "
                          + ", ".join(f"{r.name} ({r.status})" for r in others), "warn"))
    unaligned = view.unaligned
    if unaligned:
        parts.append(tag("h3", "Unaligned or uncompared items"))
        parts.append(table(["participant", "anchor", "input", "reason"],
                           [[u.get("participant", "-"), u.get("anchor", "-"),
                             u.get("input", "-"), u.get("reason", "-")] for u in unaligned]))
    if not parts:
        return note("Nothing to report: every participant finished and every capture was "
                    "aligned and compared.", "muted")
    return join(parts)
