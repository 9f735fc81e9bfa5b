"""Terminal summary of a run, in the spirit of pytest's and Polygraphy's closing lines.

A header says what was compared and the verdict at a glance; a table gives one row per
participant (status, version, emergence, top introduced-error stage, findings, every
output-level baseline's verdict, observer effect); the last line says where the HTML
report is. Colours only when stdout is a terminal and ``NO_COLOR`` is unset.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from anpred.report.drill import terminal_lines
from anpred.report.identical import identical_notes
from anpred.report.run_summary import (
    ParticipantView,
    RunSummary,
    input_list,
    noise_rule_line,
    precision_class,
    precision_lines,
    short_baseline_name,
)
from anpred.store import RunStore, Status
from anpred.store.summary import Summary

_RESET = "\033[0m"
_COLOURS = {"red": "\033[31m", "green": "\033[32m", "yellow": "\033[33m", "bold": "\033[1m"}


class _Style:
    """ANSI styling that is a no-op when disabled."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, colour: str) -> str:
        return f"{_COLOURS[colour]}{text}{_RESET}" if self.enabled and colour in _COLOURS else text


def _use_colour(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and "NO_COLOR" not in os.environ


def _rule(title: str, width: int, style: _Style, colour: str = "") -> str:
    """Return a pytest-style ``== title ==`` line (padding measured without colour codes)."""
    side = max(3, (width - len(title) - 2) // 2)
    rest = max(3, width - side - len(title) - 2)
    return "=" * side + f" {style(title, colour)} " + "=" * rest


def _format_value(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def _observer(record: ParticipantView) -> str:
    obs = record.observer
    if not obs or not obs.get("inputs"):
        return "-"
    if obs.get("identical") is True:
        return "identical"
    diff = obs.get("max_abs_diff")
    return f"max diff {diff:.2g}" if isinstance(diff, int | float) else "differs"


def _status(record: ParticipantView) -> str:
    if record.failed and record.step and record.step != "done":
        return f"{record.status} ({record.step})"
    return record.status


def _header(view: RunSummary) -> list[tuple[str, str]]:
    model = view.model
    details = []
    if model.get("granularity"):
        details.append(f"{model['granularity']} anchors")
    if view.anchors:
        details.append(f"{len(view.anchors)} anchors")
    shape = model.get("input_shape")
    packed = input_list(model)
    if packed:
        details.append(f"inputs {packed}")
    elif isinstance(shape, list) and shape:
        details.append("input " + "x".join(str(d) for d in shape))
    if model.get("opset") is not None:
        details.append(f"opset {model['opset']}")
    if model.get("weights"):
        details.append(f"weights {model['weights']}")
    ids = view.input_ids
    shown = ", ".join(ids[:8]) + (f", ... (+{len(ids) - 8})" if len(ids) > 8 else "")
    ref = view.reference
    names = [p.name for p in view.participants]
    lines = [("model", view.model_name + (f"  ({', '.join(details)})" if details else "")),
             ("inputs", f"{len(ids)}: {shown}" if ids else "none recorded"),
             ("participants", f"{len(names)}: {', '.join(names)}" if names else "none recorded")]
    if ref.get("fp64"):
        lines.append(("reference", f"{ref['fp64']} (exact), {ref.get('fp32') or '?'} "
                                   "(fp32 noise floor)"))
    rule = noise_rule_line(view.section("oracle"))
    if rule:
        lines.append(("noise rule", rule))
    for line in precision_lines(view.section("precision")):
        lines.append(("precision", line))
    return lines


def _verdict(view: RunSummary, style: _Style) -> list[tuple[str, str]]:
    counts = view.findings_per_participant
    total = sum(counts.values())
    judged = view.judged
    if total:
        parts = ", ".join(f"{p} {n}" for p, n in counts.most_common())
        verdict = style(f"{total} finding{'s' if total != 1 else ''}", "red") + f" ({parts})"
    elif judged:
        verdict = style("clean", "green") + f": no findings ({len(judged)} participants judged)"
    else:
        verdict = style("no verdict", "yellow") + ": no participant was judged (partial run)"
    if view.failed:
        verdict += f"; {len(view.failed)} participant(s) failed"
    lines = [("verdict", verdict)]
    for record in view.failed:
        message = f": {record.message.splitlines()[0][:120]}" if record.message.strip() else ""
        at = f" at {record.step}" if record.step else ""
        lines.append(("failed", style(f"{record.name} {record.status}{at}", "red") + message))
    return lines


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], styles: Sequence[Sequence[str]],
           style: _Style) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for row, colours in zip(rows, styles, strict=True):
        cells = [style(c.ljust(w), s) if s else c.ljust(w)
                 for c, w, s in zip(row, widths, colours, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return lines


def _participant_rows(view: RunSummary) -> tuple[list[str], list[list[str]], list[list[str]]]:
    baselines = view.baseline_names
    precision = view.section("precision")
    mixed = bool(precision_lines(precision))  # a class column only where classes differ
    header = ["participant", *(["class"] if mixed else []), "status", "version", "emergence",
              "top stage", "findings", *[short_baseline_name(b) for b in baselines], "observer"]
    counts = view.findings_per_participant
    n_inputs = len(view.input_ids)
    rows, colours = [], []
    for record in view.participants:
        judged = record.name in view.judged
        n = counts.get(record.name, 0)
        row = [record.name, _status(record), record.short_version or "-",
               view.emergence(record.name) or "-", view.top_stage(record.name) or "-",
               str(n) if judged or n else "-"]
        ok = record.status == Status.OK
        colour = ["", "red" if record.failed else "green" if ok else "yellow",
                  "", "", "", "red" if n else ""]
        if mixed:
            fell_back = " (ran fp32)" if record.settings.get("fell_back") else ""
            row.insert(1, (precision_class(precision, record.name) or "-") + fell_back)
            colour.insert(1, "")
        for baseline in baselines:
            passed, failed = view.baseline_verdict(baseline, record.name)
            if passed is None:
                row.append("-")
                colour.append("")
            elif passed:
                row.append("PASS")
                colour.append("green")
            else:
                row.append(f"FAIL {len(failed)}/{n_inputs}" if n_inputs else "FAIL")
                colour.append("red")
        observer = _observer(record)
        row.append(observer)
        colour.append("yellow" if observer.startswith(("max diff", "differs")) else "")
        rows.append(row)
        colours.append(colour)
    return header, rows, colours


def render_summary(summary: Summary | Mapping[str, Any], run_dir: Path, colour: bool = False,
                   width: int = 100) -> str:
    """Return the terminal summary as text.

    Args:
        summary: The run's summary (possibly partial).
        run_dir: The run directory (the footer names its HTML report).
        colour: Whether to add ANSI colour codes.
        width: Width of the rule lines.

    Returns:
        The summary, lines joined by newlines, ending with a newline.
    """
    view = RunSummary(summary)
    style = _Style(colour)
    lines = [_rule(f"anpred: {view.model_name}", width, style, "bold")]
    pairs = _header(view) + _verdict(view, style)
    label = max(len(k) for k, _ in pairs)
    lines += [f"{k.ljust(label)}  {v}" for k, v in pairs]
    lines.append("")
    header, rows, colours = _participant_rows(view)
    if rows:
        lines += _table(header, rows, colours, style)
    else:
        lines.append("no participant records")
    names = view.baseline_names
    legend = [f"{short_baseline_name(b)}={b}" for b in names if short_baseline_name(b) != b]
    if names:
        lines.append("")
        text = ("baselines (output level; FAIL k/n: k of n inputs failed): "
                + ", ".join(legend or names))
        lines += textwrap.wrap(text, width=max(width, 60), subsequent_indent="  ")
    if view.pairwise:
        lines.append("note: only two participants were judged, so the consensus is a pairwise "
                     "comparison: a deviation cannot be blamed on one of them.")
    masked = view.masking.get("n_cases_with_inner_finding")
    if isinstance(masked, int) and masked:
        lines.append(f"note: {masked} (participant, input) case(s) have anchor findings; "
                     "see the report for which baselines miss them at the output.")
    unaligned = view.unaligned
    if unaligned:
        lines.append(f"note: {len(unaligned)} item(s) could not be aligned or compared "
                     "(see the report).")
    for sentence in identical_notes(view.raw.get("participants")):
        lines += textwrap.wrap(f"note: {sentence}.", width=max(width, 60), subsequent_indent="  ")
    lines += terminal_lines(view)
    wall = view.wall_seconds
    footer = f"report: {RunStore(run_dir).report_path}"
    lines.append("")
    lines.append(_rule(footer + (f" in {wall:.1f}s" if wall is not None else ""), width, style))
    return "\n".join(lines) + "\n"


def print_summary(summary: Summary | Mapping[str, Any], run_dir: Path) -> None:
    """Print the terminal summary of a run to stdout.

    Args:
        summary: The run's summary as written to ``summary.json`` (possibly partial).
        run_dir: The run directory holding the HTML report.
    """
    stream = sys.stdout
    width = min(shutil.get_terminal_size((100, 24)).columns, 120)
    stream.write(render_summary(summary, run_dir, colour=_use_colour(stream), width=width))
    stream.flush()
